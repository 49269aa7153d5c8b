#!/usr/bin/env python3
"""MsT Table 11: Llama-2-7B with DeepSpeed-Ulysses on 2, 4 and 8 GPUs, the longest sequence with
activation recomputation alone and with mini-sequences, beside miniLST (measured at CPU scale on 2
and 4 ranks, predicted at the paper's scale).

    /usr/bin/python3 analysis/seed/mst_table11.py DIR [--tiny]     (DIR: scripts/bench/seed/mst_table11.sh's output)
"""
import numpy as np

import seed_common as sc
import seed_papers as sp

STACKS = ["recomputation", "mst"]
NAMES = {"recomputation": "ar", "mst": "mst"}  # the script's row names
GPUS = [2, 4, 8]
WHY = {"recomputation": "the paper's distributed run keeps far more than its one-GPU run (24K on 2 GPUs against "
                        "45K on one, Table 3); miniLST counts its own buffers and Ulysses' all-to-all buffers",
       "mst": "as recomputation's row, with the MLP and LM head chunked"}


def main():
    st = sc.parse_args(__doc__)
    t = sp.MST_TABLE11
    budget, act = st.value("cpu_budget_mib"), st.value("activation_budget_mib")
    names = [n for n in (f"cpu_u{u}_{NAMES[s]}" for u in (2, 4) for s in STACKS) if n in st.rows]
    cpu_rows, cpu = sc.longest_seq_rows(st, names, group=lambda n: n.split("_")[1])  # per rank count
    cmp = sc.longest_compare(
        st, "ulysses", f"Llama-2-7B with Ulysses over N GPUs: the paper's longest S beside miniLST's (predicted, "
        f"{act:,.0f} MiB of activations and buffers per GPU)", t,
        [(f"{t.printed_rows[s]}, {u} GPUs", s, f"gpu{u}_{NAMES[s]}", WHY[s], str(u)) for u in GPUS for s in STACKS
         if f"gpu{u}_{NAMES[s]}" in st.rows])
    gain = []
    for u in GPUS:
        a, m = st.plan(f"gpu{u}_ar"), st.plan(f"gpu{u}_mst")
        gain.append([u, sc.num(t.value("mst", str(u)) / t.value("recomputation", str(u)), ".2f"),
                     sc.num(m["seq_len"] / a["seq_len"] if a and m else None, ".2f")])
    sections = [
        ("MsT over recomputation per GPU count", sc.md_table(["GPUs", "paper", "miniLST"], gain)),
        (f"CPU scale: Ulysses over the ranks of inputs/max_seq_cpu.yaml (float, ZeRO-3, optimizer offload), "
         f"{budget:g} MiB of device memory per rank: longest S predicted, one step run at it",
         sc.md_table(sc.LONGEST_COLUMNS, cpu_rows)),
    ]
    notes = [
        "Recomputation = `memory.policy: hf_checkpoint` (Hugging Face's, with its whole fp32 logits and no "
        "mini-sequences); MsT = `checkpoint` with the chunk counts `auto`. Both scale with the ranks because "
        "Ulysses splits every activation over them.",
        f"Budget per GPU: MsT's single-GPU accounting (Table 2's), as the table does not state its ZeRO stage or "
        f"optimizer: an A100 80GB's 81,920 MiB less a 4,096 MiB reserve, less 6 bytes per parameter of bf16 "
        f"weights and AdamW "
        f"moments, leaves {act:,.0f} MiB for activations and buffers (`minilst plan --activation-mib`).",
        "The paper's distributed rows are short against its one-GPU ones (recomputation: 24K tokens on 2 GPUs, "
        "45K on one in Table 3); its Appendix E says the distributed setting adds memory overhead without "
        "saying what. miniLST's rows grow linearly from its one-GPU figures, so their ratio to the paper's is "
        "large; the comparable parts are the linear growth and MsT's gain over recomputation.",
        "The extracted caption of the table names Llama3-8B on one A100 and its head shows a stray \"1\" before "
        "the GPU counts; the rows and the text are Llama-2-7B on 2, 4 and 8 GPUs. K is read as 10^3 tokens.",
    ]
    if not all(cpu["measured_equals_model"]):
        notes.append("**A CPU-scale run's memory differs from its prediction** (see the table).")
    fig, ax = sc.plt.subplots(1, 2, figsize=(11, 4.2))
    data = {"gpus": GPUS, "stacks": STACKS, "cpu/rows": names}
    data.update({f"cpu/{k}": v for k, v in cpu.items()})
    for s, c in zip(STACKS, ("tab:orange", "tab:blue")):
        ours = [st.plan(f"gpu{u}_{NAMES[s]}")["seq_len"] if st.plan(f"gpu{u}_{NAMES[s]}") else np.nan for u in GPUS]
        theirs = [t.value(s, str(u)) * 1e3 for u in GPUS]
        ax[1].plot(GPUS, ours, "o-", color=c, label=f"miniLST {s} (predicted)")
        ax[1].plot(GPUS, theirs, "s--", color=c, alpha=0.6, label=f"paper {s}")
        data[f"llama2_7b/{s}/longest_seq_len"], data[f"llama2_7b/{s}/paper_seq_len"] = ours, theirs
    ax[1].set_yscale("log"), ax[1].set_xscale("log", base=2), ax[1].set_xlabel("GPUs (Ulysses degree)")
    ax[1].set_ylabel("longest S (tokens)"), ax[1].legend(fontsize=8), ax[1].set_title("Llama-2-7B, 80 GB devices")
    cs = np.asarray(cpu["longest_seq_len"], dtype=float)
    ax[0].bar(np.arange(len(cs)), cs, 0.6, color="tab:green")
    ax[0].set_xticks(np.arange(len(cs)), [n.replace("cpu_", "") for n in names])
    ax[0].set_ylabel("longest S (tokens)"), ax[0].set_title(f"CPU scale, {budget:g} MiB per rank")
    fig.suptitle(f"{t.name}: Ulysses + mini-sequences")
    sc.finish(st, "mst_table11", "mst", f"{t.name}: Llama-2-7B with Ulysses on 2, 4 and 8 GPUs", sections, notes,
              data, fig, attrs={"cpu_budget_mib": budget, "activation_budget_mib": act}, papers=[t], compares=[cmp])


if __name__ == "__main__":
    main()
