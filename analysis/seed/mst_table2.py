#!/usr/bin/env python3
"""MsT Table 2: the longest sequence of Llama-3-8B on one A100 80G, standard vs activation
recomputation vs MsT, beside miniLST (measured at CPU scale, predicted at the paper's under MsT's own
memory budget).

    /usr/bin/python3 analysis/seed/mst_table2.py DIR [--tiny]     (DIR: scripts/bench/seed/mst_table2.sh's output)
"""
import numpy as np

import seed_common as sc
import seed_papers as sp

STACKS = ["vanilla", "recomputation", "mst"]
LABELS = ["standard", "recompute", "MsT"]
# What each side counts, per row (the paper: a measured PyTorch run; miniLST: its own buffers).
WHY = {
    "vanilla": "both keep every activation and the whole [S, V] logits; the paper's run also pays PyTorch's "
               "allocator (reserved, fragmented blocks) and autograd's saved copies",
    "recomputation": "both keep each layer's input and Hugging Face's head (bf16 logits, fp32 upcast, its "
                     "gradient); the paper's recomputed layer also holds PyTorch's transient copies",
    "mst": "both chunk the MLP and the LM head; miniLST's chunks are as small as its 256 MiB budget allows "
           "(the paper's M is fixed), and no allocator overhead",
}


def main():
    st = sc.parse_args(__doc__)
    t = sp.MST_TABLE2
    budget = st.value("cpu_budget_mib")
    act = st.value("activation_budget_mib")
    cpu_rows, cpu = sc.longest_seq_rows(st, [f"cpu_{s}" for s in STACKS])
    cmp = sc.longest_compare(st, "llama3_8b", f"Llama-3-8B, one device: the paper's longest S beside miniLST's "
                             f"(predicted within {act:,.0f} MiB of activations)", t,
                             [(t.printed_rows[s], s, f"llama3_8b_{s}", WHY[s]) for s in STACKS])
    ours = [r["ours"] for r in cmp.rows]
    paper = [r["paper"] for r in cmp.rows]
    gain = [[f"MsT / {LABELS[i]}", sc.num(paper[2] / paper[i], ".2f"), sc.num(ours[2] / ours[i], ".2f")]
            for i in (0, 1)]
    sections = [
        ("MsT's gain, paper against miniLST (the paper's 60 / 5 and 60 / 14)",
         sc.md_table(["ratio", "paper", "miniLST"], gain)),
        (f"CPU scale: one rank of inputs/max_seq_cpu.yaml (float), {budget:g} MiB of device memory: longest S "
         "predicted, one step run at it", sc.md_table(sc.LONGEST_COLUMNS, cpu_rows)),
    ]
    notes = [
        "Stacks in miniLST: standard = `memory.policy: vanilla` (every activation kept, the MLP's [S, I] "
        "intermediates and the [S, V] logits with their gradient whole); activation recomputation = "
        "`hf_checkpoint` (each layer's input kept, the layer recomputed, Hugging Face's LM head: whole bf16 "
        "logits, their fp32 upcast and its gradient); MsT = `checkpoint` with `mst.mlp_chunks` and "
        "`mst.lm_head_chunks` `auto` (chunks of at most `mst.chunk_budget_mib`).",
        f"Budget: MsT's runs keep the model states on the GPU with the optimizer in the backward, so the "
        f"device holds the bf16 weights and the AdamW moments (2 + 4 bytes per parameter: the 15 and 30 GB of "
        f"MsT's Tables 9-10) and no gradient. miniLST is given what that leaves of an A100 80GB (`minilst plan "
        f"--device a100-80gb`: 81,920 MiB, less a 4,096 MiB reserve for the CUDA context): {act:,.0f} MiB for activations, workspace and buffers "
        "(`minilst plan --activation-mib`).",
        "K in the paper's cells is read as 10^3 tokens (its text writes 60k).",
        "At CPU scale the model states stay on the device (one rank), as in MsT; the budget is small so that "
        "the model's 27 MiB of states leave room for activations, the regime of the paper.",
    ]
    if not all(cpu["measured_equals_model"]):
        notes.append("**A CPU-scale run's memory differs from its prediction** (see the table).")
    fig, ax = sc.plt.subplots(1, 2, figsize=(11, 4.2))
    x = np.arange(3)
    ax[0].bar(x, cpu["longest_seq_len"], 0.5, color="tab:green")
    ax[0].set_xticks(x, LABELS), ax[0].set_ylabel("longest S (tokens)")
    ax[0].set_title(f"CPU scale, {budget:g} MiB (predicted, run)")
    ax[1].bar(x - 0.2, paper, 0.4, label=f"paper ({t.name}, A100)")
    ax[1].bar(x + 0.2, ours, 0.4, label="miniLST (predicted)")
    ax[1].set_yscale("log"), ax[1].set_xticks(x, LABELS)
    ax[1].set_ylabel("longest S (tokens)"), ax[1].legend(fontsize=8), ax[1].set_title("Llama-3-8B, one 80 GB device")
    fig.suptitle(f"{t.name}: longest sequence on one GPU")
    data = {f"cpu/{k}": v for k, v in cpu.items()}
    data.update({"stacks": STACKS, "llama3_8b/longest_seq_len": ours, "llama3_8b/paper_seq_len": paper})
    sc.finish(st, "mst_table2", "mst", f"{t.name}: longest sequence of Llama-3-8B, standard vs recomputation vs MsT",
              sections, notes, data, fig, attrs={"cpu_budget_mib": budget, "activation_budget_mib": act},
              papers=[t], compares=[cmp])


if __name__ == "__main__":
    main()
