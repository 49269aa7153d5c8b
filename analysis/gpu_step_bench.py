#!/usr/bin/env python3
"""Reads a scripts/bench/gpu_step.sh directory (miniLST metrics files and PyTorch
JSON timings of the same step on the same device, alternating) and prints,
writes gpu_step_bench.h5 and draws gpu_step_bench.png: per sequence length and
phase, the seconds of both, their ratio, and each phase's MFU: the phase's model
FLOPs per step over its time, over the peak. The peak is the dense GEMM rate of
the run's precision that miniLST measured at start (`peak_gflops_per_rank`, on a
GPU cuBLAS at 4096^3), the same for both; where miniLST knows the device's
datasheet (`nominal_peak_gflops_per_rank`) the MFU against that too.

    /usr/bin/python3 analysis/gpu_step_bench.py DIR

Phases: attention (core: scores, softmax, P V, and their backward), mlp (norm +
SwiGLU block), lm_head (final norm, logits, cross-entropy), optimizer (AdamW),
other (embedding, q/k/v/o projections, RoPE, residuals: the projections' FLOPs),
step. Both sides leave out the first run.warmup_steps steps (from the metrics
file). FLOPs come from the metrics file (src/model/flops.hpp, forward + backward):
flops_per_step_<phase>, and flops_per_step for the step; one rank.
Per S, whether the two step times differ by more than the noise: the spread over
rounds, or with one round "single run: no spread" and a warning where a run's own
measured steps vary by more than the difference.
"""
import glob
import json
import os
import re
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilst_metrics as mm  # noqa: E402

PHASES = ["attention", "mlp", "lm_head", "optimizer", "other", "step"]
TIMED = ["attention", "mlp", "lm_head", "optimizer"]  # timed on their own; other = step - these
FLOPS = {"attention": "flops_per_step_attention", "mlp": "flops_per_step_mlp", "lm_head": "flops_per_step_lm_head",
         "other": "flops_per_step_projections", "step": "flops_per_step"}
PRECISION = {"bf16": "bf16", "float": "fp32"}  # miniLST's run.precision -> the PyTorch peer's --precision


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def with_other(t):
    t["other"] = t["step"] - sum(t[p] for p in TIMED)
    return t


def minilst_run(path):
    run = mm.load(path)
    a = run.attrs
    t = with_other({p: mm.slowest_rank_time(run, p) for p in ["step"] + TIMED})
    return {"t": t, "warmup": run.warmup, "flops": {p: float(a[k]) for p, k in FLOPS.items()},
            "peak": float(a["peak_gflops_per_rank"]), "peak_source": text(a.get("peak_source", "")),
            "nominal": float(a["nominal_peak_gflops_per_rank"]) if "nominal_peak_gflops_per_rank" in a else None,
            "device": text(a["gpu"] if "gpu" in a else a["cpu_model"]), "precision": text(a["precision"]),
            "attention_kernel": text(a.get("attention_kernel", "")),
            "memory": float(run.memory["device_total"].max()), "run": run,
            "steps": mm.spread(mm.slowest_rank_steps(run, "step"))}


def torch_run(path, warmup):
    j = json.load(open(path))
    steps = j["steps"][warmup:]
    if not steps:
        sys.exit(f"error: {path}: no step after the {warmup} warm-up steps")
    j["t"] = with_other({p: float(np.mean([s.get(p, 0.0) for s in steps])) for p in ["step"] + TIMED})
    j["steps"] = mm.spread(s.get("step", np.nan) for s in steps)
    return j


def noise_note(S, pairs):
    """Whether miniLST's and PyTorch's step times at S differ by more than their spread (mm.difference_note)."""
    ml, pt = (mm.spread(pair[side]["t"]["step"] for pair in pairs) for side in (0, 1))
    return mm.difference_note(f"S = {S}, miniLST against PyTorch", ml, pt,
                              [pair[side]["steps"] for pair in pairs for side in (0, 1)])


def mean_times(pairs, side):  # per phase, the mean over rounds of one side (0: miniLST, 1: PyTorch)
    return {p: float(np.mean([pair[side]["t"][p] for pair in pairs])) for p in PHASES}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    runs = {}
    for path in sorted(glob.glob(os.path.join(d, "minilst_S*_r*.h5"))):
        S, r = map(int, re.search(r"minilst_S(\d+)_r(\d+)\.h5$", path).groups())
        tj = os.path.join(d, f"torch_S{S}_r{r}.json")
        if os.path.exists(tj):
            m = minilst_run(path)
            runs.setdefault(S, []).append((m, torch_run(tj, m["warmup"])))
    if not runs:
        sys.exit(f"error: no miniLST/PyTorch pairs in {d}")
    seq = sorted(runs)
    pairs = [p for S in seq for p in runs[S]]
    m0, t0 = pairs[0]
    for m, t in pairs:
        if PRECISION.get(m["precision"]) != t["precision"]:
            sys.exit(f"error: miniLST ran {m['precision']} but PyTorch {t['precision']}: not the same step")
    device, nominal = t0["device_name"], m0["nominal"]

    table = {}
    for S in seq:
        peak = float(np.mean([m["peak"] for m, _ in runs[S]]))
        mem_t = [t.get("max_memory_allocated_bytes") for _, t in runs[S]]
        table[S] = {"minilst": mean_times(runs[S], 0), "pytorch": mean_times(runs[S], 1),
                    "flops": runs[S][0][0]["flops"], "peak": peak, "rounds": len(runs[S]),
                    "minilst_memory": max(m["memory"] for m, _ in runs[S]),
                    "pytorch_memory": max(mem_t) if None not in mem_t else None}

    def mfu(S, impl, p, rate):
        return table[S]["flops"][p] / table[S][impl][p] / (rate * 1e9)

    print(f"device: {device}" + (f" (miniLST saw: {m0['device']})" if m0["device"] != device else ""))
    print(f"precision: miniLST {m0['precision']} ({m0['attention_kernel']} attention kernel), "
          f"PyTorch {t0['precision']} (PyTorch {t0['torch_version']}: "
          f"{t0['attention']} attention, GQA by {t0['gqa']}, {t0['optimizer']})")
    print(f"peak for MFU: {m0['peak_source']}, " + ", ".join(f"S = {S}: {table[S]['peak']:.1f}" for S in seq) +
          " GFLOP/s" + (f"; datasheet {nominal:.0f} GFLOP/s" if nominal else ""))
    for S in seq:
        ml, pt = table[S]["minilst"], table[S]["pytorch"]
        print(f"\nS = {S}: miniLST {ml['step']:.3f} s, PyTorch {pt['step']:.3f} s per step: "
              f"ratio miniLST/PyTorch {ml['step'] / pt['step']:.3f} ({table[S]['rounds']} round(s))")
        print(f"  {noise_note(S, runs[S])}")
        rates = [table[S]["peak"]] + ([nominal] if nominal else [])  # MFU columns: measured peak, datasheet
        print(f"  {'phase':10s} {'miniLST s':>10s} {'PyTorch s':>10s} {'ratio':>7s} {'GFLOP':>9s} "
              f"{'miniLST MFU':>12s} {'PyTorch MFU':>12s}" + (f" {'(datasheet)':>12s}" * 2 if nominal else ""))
        for p in PHASES:
            row = f"  {p:10s} {ml[p]:10.4f} {pt[p]:10.4f} {ml[p] / pt[p] if pt[p] > 0 else float('nan'):7.3f}"
            if p in FLOPS and ml[p] > 0 and pt[p] > 0:
                row += f" {table[S]['flops'][p] / 1e9:9.1f}" + "".join(
                    f" {mfu(S, 'minilst', p, rate):12.3f} {mfu(S, 'pytorch', p, rate):12.3f}" for rate in rates)
            print(row)
        mem = f"  device memory: miniLST {table[S]['minilst_memory'] / 2**30:.2f} GiB (measured)"
        if table[S]["pytorch_memory"] is not None:
            mem += f", PyTorch {table[S]['pytorch_memory'] / 2**30:.2f} GiB (max allocated)"
        print(mem)

    out = os.path.join(d, "gpu_step_bench.h5")
    with h5py.File(out + ".partial", "w") as h:
        h.attrs["schema"] = "minilst-bench-gpu-step"
        h.attrs["device"] = device
        h.attrs["device_kind"] = t0["device"]
        h.attrs["minilst_device"] = m0["device"]
        h.attrs["precision"] = m0["precision"]
        h.attrs["minilst_attention_kernel"] = m0["attention_kernel"]  # portable, tensor_core_bf16, ...
        for k in ("torch_version", "attention", "gqa", "optimizer"):
            h.attrs["pytorch_" + k] = t0[k]
        h.attrs["peak_source"] = m0["peak_source"]
        if nominal:
            h.attrs["nominal_peak_gflops"] = nominal
        h.create_dataset("seq_lens", data=np.array(seq))
        h.create_dataset("rounds", data=np.array([table[S]["rounds"] for S in seq]))
        h.create_dataset("peak_gflops", data=np.array([table[S]["peak"] for S in seq])).attrs["units"] = "GFLOP/s"
        for p in PHASES:
            ratio = [table[S]["minilst"][p] / table[S]["pytorch"][p] if table[S]["pytorch"][p] > 0 else np.nan
                     for S in seq]
            h.create_dataset(f"ratio/{p}", data=np.array(ratio)).attrs["units"] = "1"
            if p in FLOPS:
                h.create_dataset(f"flops/{p}", data=np.array([table[S]["flops"][p] for S in seq])).attrs["units"] = \
                    "FLOP"
            for impl in ("minilst", "pytorch"):
                h.create_dataset(f"{impl}/{p}_s", data=np.array([table[S][impl][p] for S in seq])).attrs["units"] = "s"
                if p in FLOPS:
                    h.create_dataset(f"{impl}/{p}_mfu", data=np.array(
                        [mfu(S, impl, p, table[S]["peak"]) for S in seq])).attrs["units"] = "1"
                    if nominal:
                        h.create_dataset(f"{impl}/{p}_mfu_nominal", data=np.array(
                            [mfu(S, impl, p, nominal) for S in seq])).attrs["units"] = "1"
        h.create_dataset("minilst/device_memory_bytes",
                         data=np.array([table[S]["minilst_memory"] for S in seq])).attrs["units"] = "bytes"
        if all(table[S]["pytorch_memory"] is not None for S in seq):
            h.create_dataset("pytorch/device_memory_bytes",
                             data=np.array([table[S]["pytorch_memory"] for S in seq])).attrs["units"] = "bytes"
    os.replace(out + ".partial", out)

    fig, axes = plt.subplots(2, len(seq), figsize=(6.5 * len(seq), 8), squeeze=False, constrained_layout=True)
    fig.suptitle(f"{device}, {m0['precision']}: miniLST against PyTorch {t0['torch_version']} "
                 f"({t0['attention']} attention)\n{mm.provenance([m['run'] for m, _ in pairs])}")
    timed = [p for p in PHASES if p != "step"]
    fp = [p for p in PHASES if p in FLOPS]
    for col, S in enumerate(seq):
        ml, pt = table[S]["minilst"], table[S]["pytorch"]
        ax = axes[0, col]
        x = np.arange(len(timed))
        ax.bar(x - 0.2, [ml[p] for p in timed], 0.4, label=f"miniLST ({ml['step']:.3g} s/step)")
        ax.bar(x + 0.2, [pt[p] for p in timed], 0.4, label=f"PyTorch ({pt['step']:.3g} s/step)")
        ax.set_xticks(x, timed)
        ax.set_ylabel("seconds per step")
        ax.set_title(f"S = {S}: time per phase (miniLST / PyTorch {ml['step'] / pt['step']:.2f})")
        ax.legend()
        ax = axes[1, col]
        x = np.arange(len(fp))
        ax.bar(x - 0.2, [mfu(S, "minilst", p, table[S]["peak"]) for p in fp], 0.4, label="miniLST")
        ax.bar(x + 0.2, [mfu(S, "pytorch", p, table[S]["peak"]) for p in fp], 0.4, label="PyTorch")
        ax.axhline(1.0, color="k", lw=1, ls="--", label=f"measured GEMM peak {table[S]['peak']:.0f} GFLOP/s")
        if nominal:
            ax.axhline(nominal / table[S]["peak"], color="grey", lw=1, ls=":", label=f"datasheet {nominal:.0f} GFLOP/s")
        ax.set_xticks(x, [p if p != "other" else "other\n(projections)" for p in fp])
        ax.set_ylabel("MFU (model FLOP/s / measured GEMM peak)")
        ax.set_title("MFU per phase")
        ax.legend()
    png = os.path.join(d, "gpu_step_bench.png")
    fig.savefig(png, dpi=110)
    print(f"\ntable: {out}\nplot:  {png}")


if __name__ == "__main__":
    main()
