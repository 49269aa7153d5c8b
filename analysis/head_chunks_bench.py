#!/usr/bin/env python3
"""Reads a scripts/bench/head_chunks.sh directory (metrics files of Ulysses with 1, 2, 4 and 8 head
chunks, alternating rounds, one run on one machine) and prints, writes head_chunks.h5 and draws
head_chunks.png:
  time     the mean over rounds of the measured step (slowest rank), its ratio to N = 1 (goal:
           N = 4 within 1.10 x), the all-to-all time left exposed and the attention time
  memory   per rank: the device high-water and the comm category (the exchange and group
           buffers: a chunk's instead of every head's), measured and equal to the model (checked)
  comm     the all-to-all bytes sent per step and rank (the same for every N)
  noise    per count the spread of the step time over rounds, and whether it exceeds the
           difference to N = 1 (noise? = yes)

    /usr/bin/python3 analysis/head_chunks_bench.py DIR
"""
import glob
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

PHASES = ["step", "attention", "alltoall"]
MEMORY = ["comm", "workspace", "activations", "device_total"]
MiB = 2.0**20


def read(path):
    """Per run: phase seconds (slowest rank, mean of the measured steps), memory and model per category, the most
    all-to-all bytes a rank sent in a measured step, and the run itself."""
    run = mm.load(path)
    t = {p: mm.slowest_rank_time(run, p) for p in PHASES}
    mem = {c: int(run.memory[c].max()) for c in MEMORY}
    model = {c: int(run.model_memory[c].max()) for c in MEMORY}
    a2a = int(run.comm["alltoall"]["bytes"][run.measured].max())
    return t, mem, model, a2a, run


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    counts = {}
    for path in sorted(glob.glob(os.path.join(d, "chunks*_r*.h5"))):
        m = re.match(r"chunks(\d+)_r\d+\.h5", os.path.basename(path))
        counts.setdefault(int(m.group(1)), []).append(read(path))
    if 1 not in counts:
        sys.exit(f"{d}: no unchunked runs (chunks1_r*.h5)")
    first = counts[1][0][4]
    cpu, isa = mm.text(first.attrs, "cpu_model"), mm.text(first.attrs, "cpu_isa")
    base = np.mean([r[0]["step"] for r in counts[1]])
    base_spread = mm.spread(r[0]["step"] for r in counts[1])
    print(f"machine: {cpu} ({isa}); {first.ranks} ranks; {len(counts[1])} round(s)")
    print("\nper head-chunk count N: s per measured step (slowest rank), mean over rounds; MiB per rank (measured = model)")
    print(f"  {'N':>3s} {'step':>8s} {'/N=1':>6s} {'noise?':>6s} {'attention':>10s} {'alltoall':>9s}"
          + "".join(f" {c:>13s}" for c in MEMORY) + f" {'a2a MiB':>9s}")
    rows = []
    for n, runs in sorted(counts.items()):
        for r in runs:
            assert r[1] == r[2], f"N = {n}: measured memory {r[1]} != model {r[2]}"
        t = {p: float(np.mean([r[0][p] for r in runs])) for p in PHASES}
        sp = mm.spread(r[0]["step"] for r in runs)
        noise = mm.noisy(base_spread, sp)
        rows.append(dict(n=n, t=t, ratio=t["step"] / base, mem=runs[0][1], a2a=runs[0][3], spread=sp))
        print(f"  {n:3d} {t['step']:8.4f} {t['step'] / base:6.3f} {'?' if noise is None else 'yes' if noise else 'no':>6s} "
              f"{t['attention']:10.4f} {t['alltoall']:9.4f}" + "".join(f" {rows[-1]['mem'][c] / MiB:13.2f}" for c in MEMORY)
              + f" {rows[-1]['a2a'] / MiB:9.2f}")
    four = [r for r in rows if r["n"] == 4]
    if four:
        print(f"\nN = 4 / N = 1 step time: {four[0]['ratio']:.3f} (goal <= 1.10)")
    if len({r["a2a"] for r in rows}) != 1:
        print("**the all-to-all bytes differ between counts**")
    print("noise? = yes: the spread over rounds of the count or of N = 1 exceeds their difference; ? with one round")
    with h5py.File(os.path.join(d, "head_chunks.h5"), "w") as h:
        h.attrs["cpu_model"], h.attrs["cpu_isa"], h.attrs["ranks"] = cpu, isa, first.ranks
        h.attrs["command"] = "scripts/bench/head_chunks.sh"
        h.create_dataset("head_chunks", data=np.array([r["n"] for r in rows]))
        h.create_dataset("step_ratio_to_unchunked", data=np.array([r["ratio"] for r in rows]))
        for p in PHASES:
            h.create_dataset(f"seconds/{p}", data=np.array([r["t"][p] for r in rows])).attrs["units"] = "s"
        for c in MEMORY:
            h.create_dataset(f"memory/{c}", data=np.array([r["mem"][c] for r in rows])).attrs["units"] = "B"
        h.create_dataset("comm/alltoall", data=np.array([r["a2a"] for r in rows])).attrs["units"] = "B"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    x = np.arange(len(rows))
    labels = [str(r["n"]) for r in rows]
    ax1.bar(x, [r["t"]["step"] for r in rows], label="step")
    ax1.bar(x, [r["t"]["alltoall"] for r in rows], label="alltoall (exposed)")
    for k, r in enumerate(rows):
        ax1.text(k, r["t"]["step"], f"{r['ratio']:.2f}x", ha="center", va="bottom", fontsize=8)
    ax1.set_xticks(x, labels), ax1.set_xlabel("head chunks N"), ax1.set_ylabel("s per measured step")
    ax1.set_title(f"Step time, {first.ranks} ranks ({cpu})"), ax1.legend(fontsize=8, loc="lower right")
    ax2.bar(x - 0.2, [r["mem"]["device_total"] / MiB for r in rows], 0.4, label="device high-water")
    ax2.bar(x + 0.2, [r["mem"]["comm"] / MiB for r in rows], 0.4, label="comm buffers")
    ax2.set_xticks(x, labels), ax2.set_xlabel("head chunks N"), ax2.set_ylabel("MiB per rank")
    ax2.set_title("Memory per rank (measured = model)"), ax2.legend(fontsize=8)
    fig.suptitle(f"Head-chunked Ulysses: {mm.provenance([r[4] for runs in counts.values() for r in runs])}", fontsize=9)
    fig.savefig(os.path.join(d, "head_chunks.png"), dpi=110)
    print(f"\ntable: {os.path.join(d, 'head_chunks.h5')}\nplot:  {os.path.join(d, 'head_chunks.png')}")


if __name__ == "__main__":
    main()
