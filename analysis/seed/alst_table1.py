#!/usr/bin/env python3
"""ALST Table 1 (the feature ablation ladder) with Section 5.5's baseline-vs-ALST rows on 1, 8 and 32
GPUs, and UPipe's head-chunked records on 8 and 16, beside miniLST: the CPU-scale ladder measured on 2 ranks, and Llama-3-8B predicted on 8, 1 and
32 ranks.

    /usr/bin/python3 analysis/seed/alst_table1.py DIR [--tiny]     (DIR: scripts/bench/seed/alst_table1.sh's output)
"""
import math

import numpy as np

import seed_common as sc
import seed_papers as sp

RUNGS = ["base", "loss", "ulysses", "mlp", "offload", "all"]
COL_S, COL_T, COL_F = sp.ALST_TABLE1.columns
# What each rung counts in miniLST against ALST's measured PyTorch / DeepSpeed run.
WHY = {
    "base": "Hugging Face's head in both (miniLST's hf_checkpoint: whole bf16 logits, fp32 upcast and its gradient), "
            "the ranks data parallel; ALST's run also pays PyTorch's allocator, NCCL's and DeepSpeed's buffers",
    "loss": "the [S, V] logits go: chunks fused with the loss in both",
    "ulysses": "the sequence split over the 8 ranks; miniLST counts its all-to-all buffers",
    "mlp": "the MLP in chunks: little at this length in both",
    "offload": "each layer's checkpointed input in host memory (1.9 TB / 8 per rank)",
    "all": "every technique; ALST notes its GPUs had memory left when the host memory ran out",
}


def binds(p, device_mib, host_mib):
    """Which budget a longest-S plan filled: the device's, the host's, or both."""
    dev = sc.plan_mem(p, "device_total") / sc.MiB >= 0.99 * device_mib
    host = (sc.plan_mem(p, "host_offload") + sc.plan_mem(p, "host_optimizer")) / sc.MiB >= 0.99 * host_mib
    return " and ".join(x for x, on in (("device", dev), ("host", host)) if on) or "neither (a step limit)"


def main():
    st = sc.parse_args(__doc__)
    t1, t5 = sp.ALST_TABLE1, sp.ALST_SECTION55
    budget, dev, node = st.value("cpu_budget_mib"), st.value("device_mib"), st.value("node_host_mib")
    cpu_rows, cpu = sc.longest_seq_rows(st, [f"cpu_{r}" for r in RUNGS])

    # Longest S: Table 1's rungs on 8 ranks, Section 5.5's 1- and 32-GPU rows (its 8-GPU rows are Table 1's).
    rows = [(t1, r, f"gpu8_{r}", 8, WHY[r]) for r in RUNGS]
    rows += [(sp.UPIPE_RECORDS, f"gpu{g}", f"gpu{g}_upipe", g,
              "ALST's setting with Ulysses over chunks of heads (parallel.ulysses_head_chunks auto: the count of the "
              "longest plan): a chunk's all-to-all buffers and attention gradients instead of every head's")
             for g in (8, 16)]
    rows += [(t5, f"gpu{g}/{r}", f"gpu{g}_{r}", g, w) for g in (1, 32) for r, w in (
        ("base", "ALST's one-GPU baseline also offloads the weights to the CPU, which miniLST cannot (ZeRO-Offload "
                 "keeps the bf16 weights on the device)" if g == 1 else WHY["base"]),
        ("all", "the node's whole 1.9 TB for one GPU" if g == 1 else "Ulysses over 32 ranks, 1.9 TB / 8 per rank"))]
    longest = sc.Compare("longest", f"Longest sequence: ALST's (measured, H100s) beside miniLST's (predicted: "
                         f"{dev:,.0f} MiB per device, host as the row says)", "tokens", ",.0f")
    work = sc.Compare("work", "Work per GPU and iteration: ALST's TFLOPS x iteration time beside miniLST's model "
                      "FLOPs per rank of one step at the paper's S (not in --tiny)", "PFLOP", ".1f")
    for t, row, name, g, why in rows:
        p = st.plan(name)
        host = node if g == 1 else node / 8
        label = t.printed_rows[row] + (", 8 GPUs" if t is t1 else "")
        longest.add(label, t, row, COL_S, p["seq_len"] if p else None,
                    why + (f"; fills the {binds(p, dev, host)} budget" if p else ""),
                    ours_text=None if p else "skipped: " + st.why(name))
        at = st.plan(f"{name}_at_paper_s")
        if at:
            work.add(label, t, row, COL_F, at["flops_per_step"] / at["ranks"] / 1e15,
                     "ALST counts Megatron-LM's FLOPs: attention as non-causal (x 2) and the recomputed forward "
                     "(x 4/3); miniLST counts causal attention and no recomputation: 2.67 on attention-bound rows",
                     paper=t.value(row, COL_F) * t.value(row, COL_T) / 1e3,
                     printed=f"{t.cell(row, COL_F)} x {t.cell(row, COL_T)}")
    ladder = [[t1.printed_rows[r], sc.num(t1.value(r, COL_S) / t1.value("base", COL_S), ".1f"),
               sc.num(longest.rows[i]["ours"] / longest.rows[0]["ours"], ".1f")] for i, r in enumerate(RUNGS)]
    sections = [
        ("The ladder as multiples of its baseline (8 GPUs)", sc.md_table(["rung", "ALST", "miniLST"], ladder)),
        (f"CPU scale: 2 ranks of inputs/max_seq_cpu.yaml (float, ZeRO-3, optimizer offload), {budget:g} MiB of "
         "device memory per rank: longest S predicted, one step run at it", sc.md_table(sc.LONGEST_COLUMNS, cpu_rows)),
    ]
    notes = [
        "What each rung is in miniLST: baseline = `memory.policy: hf_checkpoint` (checkpointing with the whole [S, V] "
        "bf16 logits, their fp32 upcast and its gradient, the MLP whole) and, without Ulysses, the ranks data "
        "parallel (each its own sequence of S tokens, as ALST's baseline); tiled logits & loss = `checkpoint` with "
        "`mst.lm_head_chunks: auto`; Ulysses = `parallel.ulysses: 8` (2 at CPU scale, 32 on 4 nodes); tiled MLP = "
        "`mst.mlp_chunks: auto`; activation checkpoint offload = `checkpoint_offload` (each layer's input in host "
        "memory). Every row shards the model states with ZeRO-3 (one GPU: ZeRO-Offload, stage 2) and keeps AdamW "
        "on the host, as ALST does.",
        f"Budgets: an H100 80GB offers 81,559 MiB (`minilst plan --device h100-80gb`); the rows keep 4,096 MiB "
        f"of it for the CUDA context and NCCL (`--reserve-mib 4096`): {dev:,.0f} MiB per device. ALST's node has 1.9 TB of host memory (its Section 5.3; the same section also "
        f"writes 1.9TiB), {node:,.0f} MiB: a rank of 8 or 32 gets an eighth, the one-GPU rows all of it.",
        "Longest S: ALST's are measured runs of PyTorch, DeepSpeed and Hugging Face Transformers; they pay for the "
        "caching allocator's fragmentation, NCCL's and DeepSpeed's buffers, the autograd graph and activations "
        "miniLST does not keep (it counts only its own buffers, each predicted to the byte). The rows' last column "
        "says which budget each prediction fills.",
        "Section 5.5's three tables have no caption in the extracted text; they are named here by section and GPU "
        "count. Their 8-GPU rows repeat Table 1's first and last rows.",
        "Time: ALST's iteration times are H100 runs; the CPU-scale step times show the same trend only (longer S, "
        "more attention work).",
    ]
    if not all(cpu["measured_equals_model"]):
        notes.append("**A CPU-scale run's memory differs from its prediction** (see the table).")
    fig, ax = sc.plt.subplots(1, 2, figsize=(12, 4.5))
    x = np.arange(len(longest.rows))
    ax[0].bar(x - 0.2, [r["paper"] for r in longest.rows], 0.4, label="ALST (measured, H100s)")
    ax[0].bar(x + 0.2, [r["ours"] for r in longest.rows], 0.4, label="miniLST (predicted)")
    ax[0].set_yscale("log"), ax[0].set_ylabel("longest sequence (tokens)"), ax[0].legend(fontsize=8)
    ax[0].set_xticks(x, RUNGS + ["8 UPipe", "16 UPipe", "1 base", "1 ALST", "32 base", "32 ALST"], fontsize=7,
                     rotation=30)
    ax[0].set_title("Llama-3-8B: the ladder on 8 GPUs, then 1 and 32")
    ax[1].bar(np.arange(len(RUNGS)), cpu["longest_seq_len"], 0.5, color="tab:green", label="longest S")
    ax[1].set_ylabel("longest sequence (tokens)"), ax[1].set_xticks(np.arange(len(RUNGS)), RUNGS)
    ax2 = ax[1].twinx()
    ax2.plot(np.arange(len(RUNGS)), cpu["step_s"], "o", color="tab:red", label="step s at that S")
    ax2.set_ylabel("step time (s)")
    ax[1].set_title(f"CPU scale: 2 ranks, {budget:g} MiB per rank")
    fig.suptitle(f"{t1.name}: the feature ablation ladder (and Section 5.5)")
    data = {"rungs": RUNGS, "cpu/rungs": RUNGS}
    data.update({f"cpu/{k}": v for k, v in cpu.items()})
    data.update({"gpu8/longest_seq_len": [r["ours"] for r in longest.rows[:6]],
                 "gpu8/paper_seq_len": [r["paper"] for r in longest.rows[:6]],
                 "upipe/rows": ["gpu8", "gpu16"],
                 "upipe/longest_seq_len": [r["ours"] for r in longest.rows[6:8]],
                 "upipe/paper_seq_len": [r["paper"] for r in longest.rows[6:8]],
                 "section55/rows": ["gpu1/base", "gpu1/all", "gpu32/base", "gpu32/all"],
                 "section55/longest_seq_len": [r["ours"] for r in longest.rows[8:]],
                 "section55/paper_seq_len": [r["paper"] for r in longest.rows[8:]]})
    sc.finish(st, "alst_table1", "alst",
              f"{t1.name}: feature ablations (with Section 5.5's 1-, 8- and 32-GPU rows and UPipe's records)",
              sections, notes, data, fig, attrs={"cpu_budget_mib": budget, "device_mib": dev, "node_host_mib": node},
              papers=[t1, t5, sp.UPIPE_RECORDS], compares=[longest] + ([work] if work.rows else []))


if __name__ == "__main__":
    main()
