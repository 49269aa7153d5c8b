"""ALST Table 1 (the feature ablation ladder) with Tables 2-3's one-GPU rows, beside miniLST:
the CPU-scale ladder measured on 2 ranks, and the Llama-3-8B ladder predicted on 8 (and 1) ranks.

    /usr/bin/python3 analysis/seed/alst_table1.py DIR [--tiny]     (DIR: scripts/bench/seed/alst_table1.sh's output)
"""
import math

import numpy as np

import seed_common as sc

# ALST, arXiv 2506.13996, Table 1 (one 8x H100 node, Llama-8B, bs = 1): sequence length,
# iteration time (h:mm:ss) and TFLOPS, as printed. Tables 2 and 3 repeat the baseline row
# for 8 GPUs and give the one-GPU rows (whose baseline also offloads the weights to the CPU).
PAPER_8 = {
    "base": ("32K", "0:00:17", 231.6),
    "loss": ("160K", "0:02:03", 514.4),
    "ulysses": ("1.1M", "0:09:24", 576.1),
    "mlp": ("1.2M", "0:11:43", 548.7),
    "offload": ("2.4M", "0:43:30", 585.8),
    "all": ("3.7M", "1:47:35", 590.6),
}
PAPER_1 = {"base": ("32K", "0:00:26", 189.4), "all": ("500K", "0:16:50", 548.1)}
RUNGS = ["base", "loss", "ulysses", "mlp", "offload", "all"]


def paper_tokens(s: str) -> float:
    """The paper's 32K / 1.1M as a number (K = 10^3, M = 10^6)."""
    return float(s[:-1]) * {"K": 1e3, "M": 1e6}[s[-1]]


def seconds(hms: str) -> int:
    h, m, s = (int(x) for x in hms.split(":"))
    return 3600 * h + 60 * m + s


def main():
    st = sc.parse_args(__doc__)
    budget = float(open(f"{st.dir}/cpu_budget_mib.txt").read())

    # CPU scale
    cpu_rows, cpu_S, cpu_t, cpu_meas, cpu_model, cpu_ok = [], [], [], [], [], []
    base_S = None
    for r in RUNGS:
        label = st.rows.get(f"cpu_{r}", {}).get("label", r)
        plan, run = st.plan(f"cpu_{r}"), st.run(f"cpu_{r}_run")
        if plan is None:
            cpu_rows.append([label, "skipped: " + st.why(f"cpu_{r}")] + [""] * 6)
            for lst in (cpu_S, cpu_t, cpu_meas, cpu_model):
                lst.append(math.nan)
            cpu_ok.append(True)
            continue
        S = plan["seq_len"]
        base_S = base_S or (S if r == "base" else None)
        meas, model = sc.mem(run, "device_total"), sc.plan_mem(plan, "device_total")
        ok = sc.model_matches(run) and meas == model
        cpu_rows.append([label, f"{S:,}", sc.num(S / base_S if base_S else None, ".1f"), f"{sc.step_s(run):.3f}",
                         f"{sc.gflops_per_rank(run):.1f}", sc.mib(meas), sc.mib(model), "yes" if ok else "**no**"])
        cpu_S.append(S), cpu_t.append(sc.step_s(run)), cpu_meas.append(meas), cpu_model.append(model)
        cpu_ok.append(ok)

    # Paper scale, 8 ranks and 1 rank
    def paper_rows(prefix, paper, rungs, ranks):
        rows, ours, theirs, flop_ours, flop_theirs = [], [], [], [], []
        base_ours = st.plan(f"{prefix}_base")
        for r in rungs:
            p, at = st.plan(f"{prefix}_{r}"), st.plan(f"{prefix}_{r}_at_paper_s")
            seq, t, tflops = paper.get(r, (None, None, None))
            label = st.rows.get(f"{prefix}_{r}", {}).get("label", r)
            S = p["seq_len"] if p else None
            f_ours = at["flops_per_step"] / ranks if at else None
            f_theirs = tflops * 1e12 * seconds(t) if t else None
            rows.append([label, seq or "n/a", sc.tokens(S) if p else "skipped: " + st.why(f"{prefix}_{r}"),
                         sc.num(paper_tokens(seq) / paper_tokens(paper["base"][0]) if seq else None, ".1f"),
                         sc.num(S / base_ours["seq_len"] if p and base_ours else None, ".1f"),
                         t or "n/a", sc.num(tflops, ".1f"), sc.num(f_theirs and f_theirs / 1e15, ".1f"),
                         sc.num(f_ours and f_ours / 1e15, ".1f"),
                         sc.num(f_theirs / f_ours if f_ours and f_theirs else None, ".2f"),
                         sc.gib(sc.plan_mem(p, "host_offload") + sc.plan_mem(p, "host_optimizer")) if p else ""])
            ours.append(sc.nan(S)), theirs.append(paper_tokens(seq) if seq else math.nan)
            flop_ours.append(sc.nan(f_ours)), flop_theirs.append(sc.nan(f_theirs))
        return rows, ours, theirs, flop_ours, flop_theirs

    g8 = paper_rows("gpu8", PAPER_8, RUNGS, 8)
    g1 = paper_rows("gpu1", PAPER_1, ["base", "all"], 1)
    cols = ["rung", "paper: S", "miniLST: longest S", "paper: x baseline", "miniLST: x baseline",
            "paper: iteration", "paper: TFLOPS", "paper: PFLOP per GPU and iteration (TFLOPS x time)",
            "miniLST: model PFLOP per rank at the paper's S", "paper / miniLST FLOP", "miniLST: host GiB per rank"]
    sections = [
        (f"CPU scale: 2 ranks of inputs/max_seq_cpu.yaml (float, ZeRO-3, optimizer offload), {budget:g} MiB of "
         "device memory per rank: longest S predicted, one step run at it",
         sc.md_table(["rung", "longest S", "x baseline", "step s", "model GFLOP/s per rank", "device MiB measured",
                      "device MiB predicted", "measured = model"], cpu_rows)),
        ("Paper scale, Table 1: Llama-3-8B on 8 ranks (Ulysses 8 from the third rung), bf16, ZeRO-3, optimizer "
         "offload; 80 GiB device and 240 GiB host per rank (miniLST predicted)",
         sc.md_table(cols, g8[0])),
        ("Paper scale, Tables 2-3: one rank (ZeRO-Offload: stage 2, AdamW on the host)", sc.md_table(cols, g1[0])),
    ]
    notes = [
        "What each rung is in miniLST: baseline = `memory.policy: hf_checkpoint` (checkpointing with the whole [S, V] "
        "bf16 logits, their fp32 upcast and its gradient, the MLP whole) and, without Ulysses, the ranks data "
        "parallel (each its own sequence of S tokens, as ALST's baseline on 8 GPUs); tiled logits & loss = "
        "`checkpoint` with `mst.lm_head_chunks: auto`; Ulysses = `parallel.ulysses: 8` (2 at CPU scale); tiled MLP "
        "= `mst.mlp_chunks: auto`; activation checkpoint offload = `checkpoint_offload` (each layer's input in host "
        "memory).",
        "The ladder's order is the paper's: every rung lengthens the sequence; at CPU scale and in the predictions "
        "the two largest steps are the tiled loss (the [S, V] logits go) and Ulysses (the sequence is split over the "
        "ranks), as in the paper.",
        "Longest S: the paper's are measured runs of PyTorch, DeepSpeed and Hugging Face Transformers; they pay for "
        "the caching allocator's fragmentation, NCCL's and DeepSpeed's buffers, the autograd graph and activations "
        "miniLST does not keep (it counts only its own buffers, each predicted to the byte). The one-GPU baseline "
        "also offloads the weights to the CPU, which miniLST cannot; its ZeRO-Offload rows keep the bf16 weights "
        "on the device. miniLST's one-rank rows are bounded by the 240 GiB of host memory (offloaded optimizer "
        "states and activations).",
        "Time: the paper's iteration times are H100 runs; the CPU-scale step times show the same trend only "
        "(longer S, more attention work). The FLOP columns compare work, not speed: the paper's TFLOPS x iteration "
        "time against miniLST's model FLOPs per rank of one step at the paper's S. The paper counts with "
        "Megatron-LM's formula, which takes attention as non-causal (twice the causal work) and adds the "
        "recomputed forward (4/3); miniLST counts causal attention, forward and backward once. On the "
        "attention-dominated rows that is a factor 2 x 4/3 = 2.67, the paper / miniLST ratio the long rows show.",
    ]
    if not all(cpu_ok):
        notes.append("**A CPU-scale run's memory differs from its prediction** (see the table).")
    fig, ax = sc.plt.subplots(1, 2, figsize=(12, 4.5))
    x = np.arange(len(RUNGS))
    ax[0].bar(x - 0.2, g8[2], 0.4, label="ALST (measured, 8 H100)")
    ax[0].bar(x + 0.2, g8[1], 0.4, label="miniLST (predicted, 8 x 80 GiB)")
    ax[0].set_yscale("log"), ax[0].set_ylabel("longest sequence (tokens)")
    ax[0].set_xticks(x, RUNGS), ax[0].legend(), ax[0].set_title("Llama-3-8B feature ladder")
    ax[1].bar(x, cpu_S, 0.5, color="tab:green", label="longest S (predicted, run)")
    ax[1].set_ylabel("longest sequence (tokens)"), ax[1].set_xticks(x, RUNGS)
    ax2 = ax[1].twinx()
    ax2.plot(x, cpu_t, "o-", color="tab:red", label="step s at that S")
    ax2.set_ylabel("step time (s)")
    ax[1].set_title(f"CPU scale: 2 ranks, {budget:g} MiB per rank")
    fig.suptitle("ALST Table 1: the feature ablation ladder")
    data = {"rungs": RUNGS, "cpu/longest_seq_len": cpu_S, "cpu/step_s": cpu_t,
            "cpu/device_bytes_measured": cpu_meas, "cpu/device_bytes_model": cpu_model,
            "cpu/measured_equals_model": cpu_ok, "gpu8/longest_seq_len": g8[1], "gpu8/paper_seq_len": g8[2],
            "gpu8/flops_per_rank_at_paper_s": g8[3], "gpu8/paper_flops_per_gpu": g8[4],
            "gpu1/rungs": ["base", "all"], "gpu1/longest_seq_len": g1[1], "gpu1/paper_seq_len": g1[2]}
    sc.finish(st, "alst_table1", "alst", "ALST Table 1: feature ablations (with Tables 2-3's one-GPU rows)",
              sections, notes, data, fig, attrs={"cpu_budget_mib": budget})


if __name__ == "__main__":
    main()
