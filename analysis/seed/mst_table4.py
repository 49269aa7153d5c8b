#!/usr/bin/env python3
"""MsT Table 4: the longest sequence on one A100 80G with gradient accumulation, activation
recomputation vs MsT (Llama-3-8B, Llama-2-7B), beside miniLST (measured at CPU scale with two
micro-steps per step, predicted at the paper's scale with the gradient buffer in the budget).

    /usr/bin/python3 analysis/seed/mst_table4.py DIR [--tiny]     (DIR: scripts/bench/seed/mst_table4.sh's output)
"""
import numpy as np

import seed_common as sc
import seed_papers as sp

STACKS = ["recomputation", "mst"]
MODELS = {"llama3_8b": "Llama-3-8B", "llama2_7b": "Llama-2-7B"}
WHY = {
    "recomputation": "each layer's input kept, Hugging Face's head (bf16 logits, fp32 upcast, its gradient); the "
                     "paper's run also pays PyTorch's allocator; miniLST's gradient buffer is the fp32 one it always "
                     "keeps, outside the activation budget",
    "mst": "chunked MLP and LM head (miniLST: chunks of at most 256 MiB); no allocator overhead",
}


def main():
    st = sc.parse_args(__doc__)
    t = sp.MST_TABLE4
    budget = st.value("cpu_budget_mib")
    cpu_rows, cpu = sc.longest_seq_rows(st, [f"cpu_{s}" for s in STACKS])
    rows = []
    for model in MODELS:
        act = st.value(f"{model}_activation_budget_mib")
        rows += [(f"{t.printed_rows[f'{model}/{s}']} ({act:,.0f} MiB)", f"{model}/{s}", f"{model}_{s}", WHY[s])
                 for s in STACKS]
    cmp = sc.longest_compare(st, "accumulation", "One device with a gradient buffer: the paper's longest S beside "
                             "miniLST's (in brackets: miniLST's activation budget)", t, rows)
    ours, paper = [r["ours"] for r in cmp.rows], [r["paper"] for r in cmp.rows]
    gain = [[title, sc.num(paper[2 * i + 1] / paper[2 * i], ".2f"), sc.num(ours[2 * i + 1] / ours[2 * i], ".2f")]
            for i, title in enumerate(MODELS.values())]
    sections = [
        ("MsT over recomputation with gradient accumulation", sc.md_table(["model", "paper", "miniLST"], gain)),
        (f"CPU scale: one rank of inputs/max_seq_cpu.yaml (float), two micro-steps per step, {budget:g} MiB of "
         "device memory: longest S predicted, one step run at it", sc.md_table(sc.LONGEST_COLUMNS, cpu_rows)),
    ]
    notes = [
        "Budget: as Table 2's (an A100 80GB's 81,920 MiB less a 4,096 MiB reserve, bf16 weights and AdamW "
        "moments on the "
        "device), less the bf16 gradients that accumulation keeps between micro-steps: 8 bytes per parameter, "
        "MsT's 15 + 30 + 15 GB for Llama-3-8B (its Tables 9-10). The rest is the activation budget "
        "(`minilst plan --activation-mib`).",
        "miniLST always keeps an fp32 gradient buffer (it has no optimizer-in-backward), and "
        "`run.grad_accum` adds nothing to it: the CPU rows' memory is the same with one micro-step or two, and "
        "equals the prediction. Gradient accumulation therefore changes only the paper-scale budget here.",
        "K in the paper's cells is read as 10^3 tokens.",
    ]
    if not all(cpu["measured_equals_model"]):
        notes.append("**A CPU-scale run's memory differs from its prediction** (see the table).")
    fig, ax = sc.plt.subplots(1, 2, figsize=(11, 4.2))
    x = np.arange(2)
    ax[0].bar(x, cpu["longest_seq_len"], 0.5, color="tab:green")
    ax[0].set_xticks(x, ["recompute", "MsT"]), ax[0].set_ylabel("longest S (tokens)")
    ax[0].set_title(f"CPU scale, 2 micro-steps, {budget:g} MiB")
    x = np.arange(4)
    ax[1].bar(x - 0.2, paper, 0.4, label=f"paper ({t.name})")
    ax[1].bar(x + 0.2, ours, 0.4, label="miniLST (predicted)")
    ax[1].set_xticks(x, ["L3 recompute", "L3 MsT", "L2 recompute", "L2 MsT"], fontsize=8)
    ax[1].set_yscale("log"), ax[1].set_ylabel("longest S (tokens)"), ax[1].legend(fontsize=8)
    ax[1].set_title("one 80 GB device, gradient accumulation")
    fig.suptitle(f"{t.name}: longest sequence with gradient accumulation")
    data = {f"cpu/{k}": v for k, v in cpu.items()}
    data.update({"stacks": STACKS, "gpu/longest_seq_len": ours, "gpu/paper_seq_len": paper})
    sc.finish(st, "mst_table4", "mst", f"{t.name}: longest sequence with gradient accumulation", sections, notes,
              data, fig, attrs={"cpu_budget_mib": budget}, papers=[t], compares=[cmp])


if __name__ == "__main__":
    main()
