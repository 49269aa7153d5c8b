#!/usr/bin/env python3
"""Reads a scripts/bench/step.sh directory (miniLST metrics files, PyTorch JSON
timings, the machine's GEMM rate in the run's precision and the attention kernel
alone, one run) and prints, writes step_bench.h5 and draws step_bench.png: per
sequence length and phase, seconds for miniLST and PyTorch, GFLOP/s and the
fraction of the machine's GEMM rate (fp32: the BLAS's SGEMM; bf16: oneDNN's bf16
matmul, the CPU's matrix unit where it has one), and the ratio of step times.

    /usr/bin/python3 analysis/step_bench.py DIR

Phases: attention (core: scores, softmax, P V, and their backward), mlp (norm +
SwiGLU block), lm_head (final norm, logits, cross-entropy), optimizer (AdamW),
other (embedding, q/k/v/o projections, RoPE, residuals: the projections' FLOPs).
FLOPs per phase come from the miniLST metrics file (src/model/flops.hpp), forward
+ backward; the MLP's gate/up recompute is not counted (a useful-FLOP rate).
Per sequence length, whether the two step times differ by more than the noise:
the spread over rounds, or with one round "single run: no spread" and a warning
where a run's own measured steps vary by more than the difference.
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

PHASES = ["attention", "mlp", "lm_head", "optimizer", "other"]
FLOPS = {"attention": "attention", "mlp": "mlp", "lm_head": "lm_head", "other": "projections"}


def minilst_phases(run):
    """Seconds per phase (slowest rank, mean of the measured steps), FLOPs per phase, the measured steps' spread."""
    t = {p: mm.slowest_rank_time(run, p) for p in ("step", "attention", "mlp", "lm_head", "optimizer")}
    t["other"] = t["step"] - sum(t[p] for p in ("attention", "mlp", "lm_head", "optimizer"))
    flops = {p: float(run.attrs["flops_per_step_" + FLOPS[p]]) for p in FLOPS}
    return t, flops, mm.spread(mm.slowest_rank_steps(run, "step"))


def torch_phases(path):
    """Seconds per phase, mean of the steps after the first (it warms up), and the steps' spread."""
    steps = json.load(open(path))["steps"][1:]
    t = {p: float(np.mean([s.get(p, 0.0) for s in steps])) for p in ("step", "attention", "mlp", "lm_head", "optimizer")}
    t["other"] = t["step"] - sum(t[p] for p in ("attention", "mlp", "lm_head", "optimizer"))
    return t, mm.spread(s.get("step", np.nan) for s in steps)


def noise_note(S, pairs):
    """Whether miniLST's and PyTorch's step times at S differ by more than their spread (mm.difference_note)."""
    ml = mm.spread(m[0]["step"] for m, _ in pairs)
    pt = mm.spread(t[0]["step"] for _, t in pairs)
    return mm.difference_note(f"S = {S}, miniLST against PyTorch", ml, pt,
                              [m[2] for m, _ in pairs] + [t[1] for _, t in pairs])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    sgemm = json.load(open(os.path.join(d, "sgemm.json")))["gflops"]
    bf16gemm = os.path.join(d, "bf16gemm.json")
    bf16 = json.load(open(bf16gemm)) if os.path.exists(bf16gemm) else None
    blas = open(os.path.join(d, "blas.txt")).read().strip() if os.path.exists(os.path.join(d, "blas.txt")) else ""
    runs, loaded = {}, []
    for path in sorted(glob.glob(os.path.join(d, "minilst_S*_r*.h5"))):
        S, r = map(int, re.search(r"minilst_S(\d+)_r(\d+)\.h5$", path).groups())
        tj = os.path.join(d, f"torch_S{S}_r{r}.json")
        if os.path.exists(tj):
            loaded.append(mm.load(path))
            runs.setdefault(S, []).append((minilst_phases(loaded[-1]), torch_phases(tj)))
    if not runs:
        sys.exit(f"error: no miniLST/PyTorch pairs in {d}")
    seq = sorted(runs)
    table = {}
    precision = str(loaded[0].attrs.get("precision", "float"))
    if precision == "bf16" and bf16:  # the machine's own bf16 rate, measured in this run
        peak, peak_name = bf16["gflops"], f"bf16 GEMM ({bf16['path']})"
    else:
        peak, peak_name = sgemm, "SGEMM"
    print(f"SGEMM {sgemm:.1f} GFLOP/s ({blas})")
    if bf16:
        print(f"bf16 GEMM {bf16['gflops']:.1f} GFLOP/s ({bf16['path']}, {bf16['m']} x {bf16['n']} x {bf16['k']}); "
              f"CPU matrix ISA: {loaded[0].attrs.get('cpu_matrix_isa', 'unknown')}")
    print(f"precision {precision}: every rate below is a fraction of {peak_name}, {peak:.1f} GFLOP/s")
    for S in seq:
        ml = {p: np.mean([m[0][p] for m, _ in runs[S]]) for p in ["step"] + PHASES}
        pt = {p: np.mean([t[0][p] for _, t in runs[S]]) for p in ["step"] + PHASES}
        flops = runs[S][0][0][1]
        table[S] = (ml, pt, flops)
        print(f"\nS = {S}: miniLST {ml['step']:.3f} s, PyTorch {pt['step']:.3f} s per step: "
              f"ratio {ml['step'] / pt['step']:.3f} ({len(runs[S])} rounds)")
        print(f"  {noise_note(S, runs[S])}")
        print(f"  {'phase':10s} {'miniLST s':>10s} {'PyTorch s':>10s} {'GFLOP':>8s} {'miniLST':>16s} {'PyTorch':>16s}")
        for p in PHASES:
            fl = flops.get(p)
            frac = lambda t: f"{fl / t / 1e9:7.1f} ({fl / t / 1e9 / peak:4.0%})" if fl and t > 0 else " " * 16  # noqa
            print(f"  {p:10s} {ml[p]:10.3f} {pt[p]:10.3f} {fl / 1e9 if fl else 0:8.1f} {frac(ml[p]):>16s} "
                  f"{frac(pt[p]):>16s}")
        total = sum(flops.values())
        print(f"  whole step: miniLST {total / ml['step'] / 1e9:.1f} GFLOP/s ({total / ml['step'] / 1e9 / peak:.0%} "
              f"of {peak_name}), PyTorch {total / pt['step'] / 1e9:.1f} GFLOP/s ({total / pt['step'] / 1e9 / peak:.0%})")
    attn = json.load(open(os.path.join(d, "attention.json"))) if os.path.exists(os.path.join(d, "attention.json")) else None
    if attn:
        print(f"\nattention kernel alone, S = {attn['seq_len']}, {attn['heads']} heads / {attn['kv_heads']} kv heads, "
              f"head dim {attn['head_dim']}: forward {attn['forward_s']:.3f} s, backward {attn['backward_s']:.3f} s, "
              f"({attn.get('attention_kernel', '?')}, {attn.get('precision', 'float')}): "
              f"{attn['gflops']:.1f} GFLOP/s = {attn['gflops'] / peak:.0%} of this run's {peak_name}")

    out = os.path.join(d, "step_bench.h5")
    with h5py.File(out + ".partial", "w") as h:
        h.attrs["schema"] = "minilst-bench-step"
        h.attrs["sgemm_gflops"] = sgemm
        h.attrs["precision"] = precision
        h.attrs["peak_gflops"] = peak
        h.attrs["peak"] = peak_name
        if bf16:
            h.attrs["bf16_gemm_gflops"] = bf16["gflops"]
            h.attrs["bf16_gemm_path"] = bf16["path"]
        h.attrs["cpu_matrix_isa"] = str(loaded[0].attrs.get("cpu_matrix_isa", "unknown"))
        h.attrs["blas_kernels"] = blas
        h.create_dataset("seq_lens", data=np.array(seq))
        h.create_dataset("ratio", data=np.array([table[S][0]["step"] / table[S][1]["step"] for S in seq]))
        for impl, k in (("minilst", 0), ("pytorch", 1)):
            for p in ["step"] + PHASES:
                ds = h.create_dataset(f"{impl}/{p}_s", data=np.array([table[S][k][p] for S in seq]))
                ds.attrs["units"] = "s"
                if p in FLOPS:
                    g = np.array([table[S][2][p] / table[S][k][p] / 1e9 for S in seq])
                    h.create_dataset(f"{impl}/{p}_gflops", data=g).attrs["units"] = "GFLOP/s"
                    h.create_dataset(f"{impl}/{p}_fraction_of_sgemm", data=g / sgemm).attrs["units"] = "1"
                    h.create_dataset(f"{impl}/{p}_fraction_of_peak", data=g / peak).attrs["units"] = "1"
        if attn:
            for k, v in attn.items():
                h.attrs["attention_kernel_" + k] = v
    os.replace(out + ".partial", out)

    fig, axes = plt.subplots(2, len(seq), figsize=(6 * len(seq), 8), squeeze=False, constrained_layout=True)
    fig.suptitle(f"miniLST against PyTorch: {mm.provenance(loaded)}", fontsize=9)
    for col, S in enumerate(seq):
        ml, pt, flops = table[S]
        ax = axes[0, col]
        x = np.arange(len(PHASES))
        ax.bar(x - 0.2, [ml[p] for p in PHASES], 0.4, label=f"miniLST ({ml['step']:.2f} s/step)")
        ax.bar(x + 0.2, [pt[p] for p in PHASES], 0.4, label=f"PyTorch ({pt['step']:.2f} s/step)")
        ax.set_xticks(x, PHASES)
        ax.set_ylabel("seconds per step")
        ax.set_title(f"S = {S}: time per phase (ratio {ml['step'] / pt['step']:.2f})")
        ax.legend()
        ax = axes[1, col]
        fp = [p for p in PHASES if p in FLOPS]
        x = np.arange(len(fp))
        ax.bar(x - 0.2, [flops[p] / ml[p] / 1e9 / peak for p in fp], 0.4, label="miniLST")
        ax.bar(x + 0.2, [flops[p] / pt[p] / 1e9 / peak for p in fp], 0.4, label="PyTorch")
        ax.axhline(1.0, color="k", lw=1, ls="--", label=f"{peak_name} {peak:.0f} GFLOP/s")
        ax.set_xticks(x, [p if p != "other" else "other\n(projections)" for p in fp])
        ax.set_ylabel(f"GFLOP/s / {peak_name} rate")
        ax.set_title(f"each phase as a fraction of {peak_name}")
        ax.legend()
    png = os.path.join(d, "step_bench.png")
    fig.savefig(png, dpi=110)
    print(f"\ntable: {out}\nplot:  {png}")


if __name__ == "__main__":
    main()
