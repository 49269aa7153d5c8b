#!/usr/bin/env python3
"""Reads a scripts/bench/zero.sh directory (metrics files of ZeRO stages 0-3 with
and without optimizer offload, alternating rounds, one run on one machine) and
prints, writes zero.h5 and draws zero.png:
  time     the mean over rounds of the measured step (slowest rank), its ratio to
           stage 0 without offload, and per step the exposed waits for gradient
           reductions and weight gathers, their background windows (the time a posted
           collective had while the rank computed) and AdamW
  memory   per rank: weights + gradients + optimizer on the device, host_optimizer,
           device_total; measured, and equal to the memory model (checked)
  comm     bytes sent per step and rank per operation
  noise    per configuration the spread of the step time over rounds, and
           whether it exceeds the difference to stage 0 (noise? = yes); with
           one round "single run: no spread"

    /usr/bin/python3 analysis/zero_bench.py DIR
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

PHASES = ["step", "grad_reduce", "grad_reduce_overlap", "param_gather", "param_gather_overlap", "optimizer"]
MEMORY = ["weights", "gradients", "optimizer", "host_optimizer", "device_total"]
MiB = 2.0**20


def read(path):
    """Per run: phase seconds (slowest rank, mean of the measured steps), memory and model per category, the most
    bytes a rank sent in a measured step per operation, the machine, the ranks, and the run itself."""
    run = mm.load(path)
    t = {p: mm.slowest_rank_time(run, p) for p in PHASES if p in run.timings}
    mem = {c: int(run.memory[c].max()) for c in MEMORY}
    model = {c: int(run.model_memory[c].max()) for c in MEMORY}
    comm = {op: int(d["bytes"][run.measured].max()) for op, d in run.comm.items()}
    return t, mem, model, comm, mm.text(run.attrs, "cpu_model"), mm.text(run.attrs, "cpu_isa"), run.ranks, run


def spread_cell(s):
    return "1 run" if s.n < 2 else f"+-{100 * s.rel_half_range:.1f}%"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    configs = {}
    for path in sorted(glob.glob(os.path.join(d, "zero*_offload_*_r*.h5"))):
        m = re.match(r"zero(\d)_offload_(true|false)_r\d+\.h5", os.path.basename(path))
        configs.setdefault((int(m.group(1)), m.group(2) == "true"), []).append(read(path))
    if (0, False) not in configs:
        sys.exit(f"{d}: no stage 0 runs (zero0_offload_false_r*.h5)")
    cpu, isa, ranks = configs[(0, False)][0][4:7]
    base = np.mean([r[0]["step"] for r in configs[(0, False)]])
    print(f"machine: {cpu} ({isa}); {ranks} ranks; {len(configs[(0, False)])} round(s)")
    print("\ntime, s per measured step (slowest rank), mean over rounds; waits exposed, windows in the background:")
    head = (f"  {'ZeRO':>4s} {'offload':>7s} {'step':>8s} {'spread':>7s} {'/stage 0':>8s} {'noise?':>6s}"
            + "".join(f" {p:>20s}" for p in PHASES[1:]))
    print(head)
    rows = []
    base_spread = mm.spread(r[0]["step"] for r in configs[(0, False)])
    for (stage, off), runs in sorted(configs.items()):
        t = {p: float(np.mean([r[0].get(p, 0.0) for r in runs])) for p in PHASES}
        mem, comm = runs[0][1], runs[0][3]
        for r in runs:
            assert r[1] == r[2], f"ZeRO {stage} offload {off}: measured memory {r[1]} != model {r[2]}"
        sp = mm.spread(r[0]["step"] for r in runs)
        noise = mm.noisy(base_spread, sp)
        rows.append(dict(stage=stage, offload=off, t=t, ratio=t["step"] / base, mem=mem, comm=comm, spread=sp,
                         steps=[mm.spread(mm.slowest_rank_steps(r[7], "step")) for r in runs]))
        print(f"  {stage:4d} {str(off):>7s} {t['step']:8.4f} {spread_cell(sp):>7s} {t['step'] / base:8.3f} "
              f"{'?' if noise is None else 'yes' if noise else 'no':>6s}" + "".join(f" {t[p]:20.4f}" for p in PHASES[1:]))
    print("\nmemory per rank, MiB (measured = model):")
    print(f"  {'ZeRO':>4s} {'offload':>7s}" + "".join(f" {c:>15s}" for c in MEMORY))
    for r in rows:
        print(f"  {r['stage']:4d} {str(r['offload']):>7s}" + "".join(f" {r['mem'][c] / MiB:15.2f}" for c in MEMORY))
    ops = sorted({op for r in rows for op in r["comm"]})
    print("\ncommunication, MiB sent per step and rank:")
    print(f"  {'ZeRO':>4s} {'offload':>7s}" + "".join(f" {op:>15s}" for op in ops))
    for r in rows:
        print(f"  {r['stage']:4d} {str(r['offload']):>7s}" + "".join(f" {r['comm'].get(op, 0) / MiB:15.3f}" for op in ops))
    stage3 = [r for r in rows if r["stage"] == 3 and not r["offload"]]
    if stage3:
        print(f"\nstage 3 / stage 0 step time: {stage3[0]['ratio']:.3f} (goal <= 1.15)")
        stage0 = rows[0]
        print(mm.difference_note("stage 3 against stage 0", stage0["spread"], stage3[0]["spread"],
                                 stage0["steps"] + stage3[0]["steps"]))
    print("noise? = yes: the spread over rounds of the configuration or of stage 0 exceeds their difference; "
          "? with one round (single run: no spread)")
    with h5py.File(os.path.join(d, "zero.h5"), "w") as h:
        h.attrs["cpu_model"], h.attrs["cpu_isa"], h.attrs["ranks"] = cpu, isa, ranks
        h.create_dataset("zero_stage", data=np.array([r["stage"] for r in rows]))
        h.create_dataset("optimizer_offload", data=np.array([int(r["offload"]) for r in rows]))
        h.create_dataset("step_ratio_to_stage0", data=np.array([r["ratio"] for r in rows]))
        for p in PHASES:
            h.create_dataset(f"seconds/{p}", data=np.array([r["t"][p] for r in rows])).attrs["units"] = "s"
        for c in MEMORY:
            h.create_dataset(f"memory/{c}", data=np.array([r["mem"][c] for r in rows])).attrs["units"] = "B"
        for op in ops:
            h.create_dataset(f"comm/{op}", data=np.array([r["comm"].get(op, 0) for r in rows])).attrs["units"] = "B"
    labels = [f"{r['stage']}{' +off' if r['offload'] else ''}" for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5), constrained_layout=True)
    x = np.arange(len(rows))
    rest = [r["t"]["step"] - r["t"]["grad_reduce"] - r["t"]["param_gather"] - r["t"]["optimizer"] for r in rows]
    bottom = np.zeros(len(rows))
    for name, vals in (("compute and the rest", rest), ("grad_reduce (exposed)", [r["t"]["grad_reduce"] for r in rows]),
                       ("param_gather (exposed)", [r["t"]["param_gather"] for r in rows]),
                       ("optimizer", [r["t"]["optimizer"] for r in rows])):
        ax1.bar(x, vals, bottom=bottom, label=name)
        bottom += np.array(vals)
    for k, r in enumerate(rows):
        ax1.text(k, bottom[k], f"{r['ratio']:.2f}x", ha="center", va="bottom", fontsize=8)
    ax1.set_xticks(x, labels)
    ax1.set_xlabel("ZeRO stage (+off: optimizer offload)")
    ax1.set_ylabel("s per measured step")
    ax1.set_title(f"Step time, {ranks} ranks ({cpu})")
    fig.suptitle(f"ZeRO stages: {mm.provenance([r[7] for runs in configs.values() for r in runs])}", fontsize=9)
    ax1.legend(fontsize=8)
    bottom = np.zeros(len(rows))
    for c in ("weights", "gradients", "optimizer", "host_optimizer"):
        vals = np.array([r["mem"][c] / MiB for r in rows])
        ax2.bar(x, vals, bottom=bottom, label=c + (" (host)" if c.startswith("host") else ""))
        bottom += vals
    ax2.set_xticks(x, labels)
    ax2.set_xlabel("ZeRO stage (+off: optimizer offload)")
    ax2.set_ylabel("MiB per rank")
    ax2.set_title("Model states per rank (measured = model)")
    ax2.legend(fontsize=8)
    fig.savefig(os.path.join(d, "zero.png"), dpi=110)
    print(f"\ntable: {os.path.join(d, 'zero.h5')}\nplot:  {os.path.join(d, 'zero.png')}")


if __name__ == "__main__":
    main()
