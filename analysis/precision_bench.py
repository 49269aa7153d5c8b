#!/usr/bin/env python3
"""Reads a scripts/bench/precision.sh directory (metrics files of float and bf16
runs, the bf16 GEMM rates, one run on one machine) and prints, writes
precision.h5 and draws precision.png:
  speed     per phase, the mean over rounds of the measured step's seconds in
            float and bf16 and their ratio (bf16 / float; below 1: bf16 faster)
  memory    the activation high-water and the device total of both, measured
  GEMM      the bf16 GEMM's GFLOP/s at the LM head's shapes over SGEMM's, and the
            path the run chose
  learning  the two loss curves of the default deck (when run): the final loss
            (mean of the last 10 steps) of bf16 against float's, relative
  noise     whether the step times of the two differ by more than their spread
            over rounds ("single run: no spread" with one round)

    /usr/bin/python3 analysis/precision_bench.py DIR
"""
import glob
import json
import os
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilst_metrics as mm  # noqa: E402

PHASES = ["step", "attention", "mlp", "lm_head", "optimizer"]
MiB = 2.0**20


def step_phases(path):
    """Seconds per phase (slowest rank, mean of the measured steps), memory, machine, GEMM path, the run."""
    run = mm.load(path)
    t = {p: mm.slowest_rank_time(run, p) for p in PHASES}
    mem = {c: float(run.memory[c].max()) for c in ("activations", "device_total")}
    a = run.attrs
    return t, mem, mm.text(a, "cpu_model"), mm.text(a, "cpu_isa"), mm.text(a, "gemm_bf16"), run


def step_noise(rows):
    """Whether bf16's step time differs from float's by more than the noise (mm.difference_note)."""
    side = {p: mm.spread(r[0]["step"] for r in rows[p]) for p in rows}
    steps = [mm.spread(mm.slowest_rank_steps(r[5], "step")) for p in rows for r in rows[p]]
    return mm.difference_note("bf16 against float, step time", side["float"], side["bf16"], steps)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    runs = {p: sorted(glob.glob(os.path.join(d, f"step_{p}_r*.h5"))) for p in ("float", "bf16")}
    if not runs["float"] or len(runs["float"]) != len(runs["bf16"]):
        sys.exit(f"{d}: expected step_float_r*.h5 and step_bf16_r*.h5 in pairs")
    mean, rows = {}, {}
    for p, files in runs.items():
        rows[p] = [step_phases(x) for x in files]
        mean[p] = {ph: float(np.mean([r[0][ph] for r in rows[p]])) for ph in PHASES}
        mean[p + "_memory"] = rows[p][0][1]
    _, _, cpu, isa, gemm, _ = rows["bf16"][0]
    print(f"machine: {cpu} ({isa}); bf16 GEMM path: {gemm}")
    print(f"\nspeed, {len(runs['float'])} round(s), seconds per measured step (one rank):")
    print(f"  {'phase':12s} {'float':>9s} {'bf16':>9s} {'bf16/float':>10s}")
    for ph in PHASES:
        print(f"  {ph:12s} {mean['float'][ph]:9.4f} {mean['bf16'][ph]:9.4f} {mean['bf16'][ph] / mean['float'][ph]:10.3f}")
    ratio = mean["bf16"]["step"] / mean["float"]["step"]
    print("\nmemory, MiB measured:")
    for c in ("activations", "device_total"):
        a, b = mean["float_memory"][c], mean["bf16_memory"][c]
        print(f"  {c:12s} {a / MiB:9.2f} {b / MiB:9.2f} {b / a:10.3f}")
    gemms = [json.load(open(x)) for x in sorted(glob.glob(os.path.join(d, "gemm_*.json")))]
    if gemms:
        print("\nbf16 GEMM against SGEMM (GFLOP/s):")
        for g in gemms:
            shape = f"{g['m']} x {g['n']} x {g['k']}{' A^T' if g['ta'] else ''}{' B^T' if g['tb'] else ''}"
            print(f"  {shape:26s} {g['sgemm_gflops']:8.1f} {g['gflops']:8.1f} {g['ratio_to_sgemm']:6.2f}  {g['path']}")
    curves = {p: os.path.join(d, f"curve_{p}.h5") for p in ("float", "bf16")}
    loss = {}
    if all(os.path.isfile(x) for x in curves.values()):
        for p, x in curves.items():
            with h5py.File(x, "r") as f:
                loss[p] = np.asarray(f["loss"][()])
        final = {p: float(l[-10:].mean()) for p, l in loss.items()}
        rel = (final["bf16"] - final["float"]) / final["float"]
        print(f"\nlearning, inputs/default.yaml, {len(loss['float'])} steps: first loss {loss['float'][0]:.4f}, "
              f"final (mean of the last 10) float {final['float']:.4f}, bf16 {final['bf16']:.4f}, "
              f"bf16 relative {rel:+.4f}")
    print(f"\nbf16 step / float step: {ratio:.3f}")
    print(step_noise(rows))

    with h5py.File(os.path.join(d, "precision.h5"), "w") as h:
        h.attrs["cpu_model"], h.attrs["cpu_isa"], h.attrs["gemm_bf16"] = cpu, isa, gemm
        h.attrs["step_ratio_bf16_over_float"] = ratio
        g = h.create_group("speed")
        g.create_dataset("phase", data=np.array(PHASES, dtype="S"))
        for p in ("float", "bf16"):
            g.create_dataset(f"{p}_seconds", data=np.array([mean[p][ph] for ph in PHASES]))
        m = h.create_group("memory")
        for p in ("float", "bf16"):
            for c, v in mean[p + "_memory"].items():
                m.attrs[f"{p}_{c}_bytes"] = v
        if gemms:
            gg = h.create_group("gemm")
            for key in ("m", "n", "k", "ta", "tb", "gflops", "sgemm_gflops"):
                gg.create_dataset(key, data=np.array([x[key] for x in gemms]))
        if loss:
            c = h.create_group("learning")
            for p, l in loss.items():
                c.create_dataset(f"loss_{p}", data=l)
            c.attrs["final_relative_difference"] = rel

    fig, axes = plt.subplots(1, 2 if loss else 1, figsize=(11 if loss else 6, 4), squeeze=False)
    ax = axes[0][0]
    x = np.arange(len(PHASES))
    ax.bar(x - 0.2, [mean["float"][ph] for ph in PHASES], 0.4, label="float")
    ax.bar(x + 0.2, [mean["bf16"][ph] for ph in PHASES], 0.4, label=f"bf16 ({gemm})")
    ax.set_xticks(x, PHASES)
    ax.set_ylabel("seconds per step")
    ax.set_title(f"step, bf16 / float = {ratio:.2f}\n{mm.provenance([r[5] for p in rows for r in rows[p]])}",
                 fontsize=8)
    ax.legend()
    if loss:
        ax = axes[0][1]
        for p, l in loss.items():
            ax.plot(np.arange(1, len(l) + 1), l, label=p)
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.set_title(f"inputs/default.yaml: final bf16 {rel:+.2%} of float", fontsize=9)
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(d, "precision.png"), dpi=120)
    print(f"table: {os.path.join(d, 'precision.h5')}\nplot:  {os.path.join(d, 'precision.png')}")


if __name__ == "__main__":
    main()
