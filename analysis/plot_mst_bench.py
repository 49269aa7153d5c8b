#!/usr/bin/env python3
"""Plots a minilst_bench_mst HDF5 file: time and workspace of the MLP block and
the LM head + loss against the mini-sequence count M, one line per sequence
length, and prints the time overhead of each M against M = 1.

    /usr/bin/python3 analysis/plot_mst_bench.py mst_bench.h5 [--png out.png]
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import stop_signals  # noqa: E402,F401  (first: a stop signal ends this script with a line and exit 4)

import argparse
import os
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilst_metrics as mm  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--png", help="output PNG (default: FILE with .png)")
    args = ap.parse_args()
    if getattr(args, 'png', None) and mm.output_problem(args.png, '--png'):  # checked before any work
        sys.exit(f"plot_mst_bench.py: error: {mm.output_problem(args.png, '--png')}")
    try:
        f = h5py.File(args.file, "r")
    except OSError as e:
        sys.exit(f"error: cannot open {args.file}: {e}")
    if f.attrs.get("schema") != "minilst-bench-mst":
        sys.exit(f"error: {args.file} is not a minilst_bench_mst file")
    S, M = f["seq_lens"][:], f["chunks"][:]
    a = f.attrs
    print(f"d={a['hidden']} I={a['intermediate']} V={a['vocab']} {a['precision']}, "
          f"SGEMM {a['sgemm_gflops']:.1f} GFLOP/s, {a.get('hostname', '?')}, git {str(a.get('git_commit', '?'))[:8]}")

    fig, axes = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    for col, block in enumerate(("mlp", "lm_head")):
        t, ws, model = f[block]["seconds"][:], f[block]["workspace_bytes"][:], f[block]["model_workspace_bytes"][:]
        gf = f[block]["gflops"][:]
        print(f"\n{block}: time / time(M=1) and GFLOP/s (fraction of SGEMM)")
        print("       S " + "".join(f"{'M=' + str(m):>16}" for m in M))
        for i, s in enumerate(S):
            cells = "".join(f"{t[i, j] / t[i, 0]:7.3f} ({gf[i, j] / a['sgemm_gflops']:4.0%})  " for j in range(len(M)))
            print(f"{s:8d} {cells}")
            axes[0, col].plot(M, t[i] / t[i, 0], marker="o", label=f"S={s}")
            axes[1, col].plot(M, ws[i] / 2**20, marker="o", label=f"S={s} measured")
            axes[1, col].plot(M, model[i] / 2**20, ls=":", color=axes[1, col].lines[-1].get_color())
        name = "MLP block" if block == "mlp" else "LM head + loss"
        axes[0, col].set_title(f"{name}: forward + backward time, relative to M = 1")
        axes[0, col].set_ylabel("time / time(M=1)")
        axes[0, col].axhline(1.05, color="grey", ls="--", lw=0.8)
        axes[0, col].text(M[0], 1.052, "+5%", color="grey", fontsize=8)
        axes[1, col].set_title(f"{name}: workspace high-water (dotted: analytic)")
        axes[1, col].set_ylabel("MiB")
        axes[1, col].set_yscale("log")
        for ax in axes[:, col]:
            ax.set_xscale("log", base=2)
            ax.set_xticks(M, [str(m) for m in M])
            ax.set_xlabel("mini-sequences M")
            ax.grid(alpha=0.3)
        axes[0, col].legend(fontsize=8)
    fig.suptitle(f"Mini-sequence blocks: d={a['hidden']}, I={a['intermediate']}, V={a['vocab']}, {a['precision']}, "
                 f"one rank; absolute times in {os.path.basename(args.file)}")
    png = args.png or args.file.rsplit(".", 1)[0] + ".png"
    mm.save_figure(fig, png, "--png", dpi=110)
    print(f"\nwrote {png}")


if __name__ == "__main__":
    try:
        main()
    except mm.MetricsError as e:  # an output refused (minilst_metrics: its rule), one line
        print(f"plot_mst_bench.py: error: {e}", file=sys.stderr)
        sys.exit(2)
