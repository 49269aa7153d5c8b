#!/usr/bin/env python3
"""Reads a scripts/bench/offload.sh directory: one metrics file per run (every
memory policy, unthrottled and at a throttled bandwidth, and the longest
sequence within a device budget). Prints the table, writes it to
offload_bench.h5 and draws offload_bench.png (step time split into compute,
recompute and offload wait; device and host memory per run).

    /usr/bin/python3 analysis/offload_bench.py DIR [--device-mib BUDGET]

The headline figures, as ratios within this one run (same machine, same deck):
  auto_overhead         step(offload, alpha auto, unthrottled) / step(full) - 1
  alpha1_activations    device activations(offload, alpha 1) / activations(full)
  throttled_auto_alpha  the alpha auto chose at the throttled bandwidth
  throttled_auto_wait   offload_wait / step at that alpha
Each headline step-time difference says whether it stands out of the noise:
with repeats (NAME_r<k>.h5 files of one run NAME) their spread against the
difference; from single runs "single run: no spread", and a warning where the
run's own measured steps vary by more than the difference (a busy machine).
"""
import argparse
import os
import re
import statistics
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilst_metrics as mm  # noqa: E402

MiB = 2.0 ** 20
ORDER = ["full", "checkpoint", "checkpoint_offload", "offload_0", "offload_0.5", "offload_1", "offload_auto"]


def run_name(path):
    """The run a file belongs to: full.h5 and full_r2.h5 (a repeat) are both 'full'."""
    return re.sub(r"_r\d+$", "", os.path.basename(path)[:-3])


def load(run):
    """The table's fields of one run."""
    a, path = run.attrs, run.path
    row = {
        "run": run_name(path),
        "policy": str(a["memory_policy"]),
        "alpha": float(a["offload_alpha"]) if "offload_alpha" in a else float("nan"),
        "alpha_mode": str(a["offload_alpha_mode"]) if "offload_alpha_mode" in a else "",
        "cap_gbs": float(a.get("offload_bandwidth_cap_gbs", 0.0)),
        "measured_gbs": float(a.get("offload_bandwidth_measured_gbs", 0.0)),
        "seq_len": int(a["seq_len"]),
        "step_s": mm.slowest_rank_time(run, "step"),
        "wait_s": mm.slowest_rank_time(run, "offload_wait"),
        "recompute_s": mm.slowest_rank_time(run, "recompute"),
        "copy_busy_s": mm.slowest_rank_time(run, "copy_engine_busy"),
        "steps": mm.spread(mm.slowest_rank_steps(run, "step")),  # the run's own measured steps
    }
    for c in ("activations", "device_total", "host_offload"):
        row[c + "_mib"] = float(run.memory[c].max()) / MiB
        row[c + "_model_mib"] = float(run.model_memory[c].max()) / MiB if c in run.model_memory else float("nan")
    return row


def pooled(rows):
    """One run's repeats as one row: the median of every number; "repeats" the spread of the step time and
    "runs" every repeat's row."""
    row = {k: (statistics.median(r[k] for r in rows) if isinstance(v, float) else v) for k, v in rows[0].items()}
    row.update(repeats=mm.spread(r["step_s"] for r in rows), runs=rows)
    return row


def step_note(what, rows, base, other):
    """Whether other's step time differs from base's by more than the noise (mm.difference_note)."""
    if base not in rows or other not in rows:
        return ""
    b, o = rows[base], rows[other]
    return mm.difference_note(what, b["repeats"], o["repeats"], [r["steps"] for r in b["runs"] + o["runs"]])


def spread_text(row):
    return "1 run" if row["repeats"].n < 2 else f"+-{100 * row['repeats'].rel_half_range:.1f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--device-mib", type=float, default=0.0, help="the device budget of the longest-sequence runs")
    args = ap.parse_args()
    paths = mm.metrics_files(args.dir)
    if not paths:
        sys.exit(f"error: no metrics files in {args.dir}")
    runs = [mm.load(p) for p in paths]
    provenance = mm.provenance(runs)
    repeats = {}
    for r in map(load, runs):
        repeats.setdefault(r["run"], []).append(r)
    rows = {name: pooled(rs) for name, rs in repeats.items()}
    key = lambda n: (n.startswith("longest"), n.endswith("throttled"), ORDER.index(n.replace("_throttled", ""))
                     if n.replace("_throttled", "") in ORDER else 99, n)
    names = sorted(rows, key=key)
    full = rows.get("full")

    print(f"{'run':30s} {'S':>6s} {'alpha':>6s} {'cap GB/s':>8s} {'step s':>8s} {'spread':>7s} {'/full':>6s} "
          f"{'wait %':>6s} {'recomp s':>8s} {'copy s':>7s} {'act MiB':>8s} {'dev MiB':>8s} {'host MiB':>8s}")
    for n in names:
        r = rows[n]
        ratio = r["step_s"] / full["step_s"] if full and r["seq_len"] == full["seq_len"] else float("nan")
        print(f"{n:30s} {r['seq_len']:6d} {r['alpha']:6.3f} {r['cap_gbs']:8.3f} {r['step_s']:8.3f} {spread_text(r):>7s} "
              f"{ratio:6.3f} "
              f"{100 * r['wait_s'] / r['step_s']:6.2f} {r['recompute_s']:8.3f} {r['copy_busy_s']:7.3f} "
              f"{r['activations_mib']:8.2f} {r['device_total_mib']:8.2f} {r['host_offload_mib']:8.2f}")

    headline = {}
    if full and "offload_auto" in rows:
        headline["auto_overhead"] = rows["offload_auto"]["step_s"] / full["step_s"] - 1
    if full and "offload_1" in rows:
        headline["alpha1_activations"] = rows["offload_1"]["activations_mib"] / full["activations_mib"]
    if "offload_auto_throttled" in rows:
        t = rows["offload_auto_throttled"]
        headline["throttled_auto_alpha"] = t["alpha"]
        headline["throttled_auto_wait"] = t["wait_s"] / t["step_s"]
        headline["throttled_cap_gbs"] = t["cap_gbs"]
    if "offload_1_throttled" in rows:
        t = rows["offload_1_throttled"]
        headline["throttled_alpha1_wait"] = t["wait_s"] / t["step_s"]
    if "offload_0_throttled" in rows:
        t = rows["offload_0_throttled"]
        headline["throttled_alpha0_wait"] = t["wait_s"] / t["step_s"]
    for p in ("full", "offload"):
        r = rows.get("longest_" + p)
        if r:
            headline[f"longest_seq_len_{p}"] = r["seq_len"]
            headline[f"longest_device_total_mib_{p}"] = r["device_total_mib"]
    print()
    for k, v in headline.items():
        print(f"  {k:34s} {v:.4f}" if isinstance(v, float) else f"  {k:34s} {v}")
    notes = [step_note("auto_overhead (offload_auto against full)", rows, "full", "offload_auto"),
             step_note("throttled alpha 1 against alpha 0", rows, "offload_0_throttled", "offload_1_throttled")]
    for line in filter(None, notes):
        print(f"  {line}")
    if args.device_mib and "longest_full" in rows and "longest_offload" in rows:
        lf, lo = rows["longest_full"], rows["longest_offload"]
        print(f"  within {args.device_mib:.1f} MiB of device memory: full runs S = {lf['seq_len']} "
              f"({lf['device_total_mib']:.1f} MiB measured), offload S = {lo['seq_len']} "
              f"({lo['device_total_mib']:.1f} MiB measured): x{lo['seq_len'] / lf['seq_len']:.2f}")

    out = os.path.join(args.dir, "offload_bench.h5")
    with h5py.File(out + ".partial", "w") as h:
        h.attrs["schema"] = "minilst-bench-offload"
        h.attrs["device_budget_mib"] = args.device_mib
        for k, v in headline.items():
            h.attrs[k] = v
        if notes[0]:
            h.attrs["auto_overhead_noise"] = notes[0]
        h.attrs["provenance"] = provenance
        h.create_dataset("run", data=np.array(names, dtype="S"))
        h.create_dataset("repeats", data=np.array([rows[n]["repeats"].n for n in names]))
        for col in ("seq_len", "alpha", "cap_gbs", "measured_gbs", "step_s", "wait_s", "recompute_s", "copy_busy_s",
                    "activations_mib", "device_total_mib", "host_offload_mib", "activations_model_mib",
                    "device_total_model_mib", "host_offload_model_mib"):
            ds = h.create_dataset(col, data=np.array([rows[n][col] for n in names]))
            ds.attrs["units"] = {"seq_len": "tokens", "alpha": "1", "cap_gbs": "GB/s", "measured_gbs": "GB/s"}.get(
                col, "s" if col.endswith("_s") else "MiB")
    os.replace(out + ".partial", out)

    same = [n for n in names if not n.startswith("longest")]
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(14, 5.5), constrained_layout=True)
    y = np.arange(len(same))
    step = np.array([rows[n]["step_s"] for n in same])
    wait = np.array([rows[n]["wait_s"] for n in same])
    rec = np.array([rows[n]["recompute_s"] for n in same])
    ax_t.barh(y, step - wait - rec, label="compute")
    ax_t.barh(y, rec, left=step - wait - rec, label="recompute")
    ax_t.barh(y, wait, left=step - wait, label="offload wait")
    if full:
        ax_t.axvline(full["step_s"] * 1.1, color="k", ls="--", lw=1, label="full + 10%")
    ax_t.set_yticks(y, [f"{n} (a={rows[n]['alpha']:.2f})" if rows[n]["policy"] == "offload" else n for n in same])
    ax_t.invert_yaxis()
    ax_t.set_xlabel("seconds per step (slowest rank, mean of measured steps)")
    ax_t.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=4)
    ax_t.set_title("step time")
    h_ = 0.27
    for i, (c, label) in enumerate((("activations", "device activations"), ("device_total", "device total"),
                                    ("host_offload", "host (offloaded)"))):
        ax_m.barh(y + (i - 1) * h_, [rows[n][c + "_mib"] for n in same], height=h_, label=label)
    ax_m.set_yticks(y, same)
    ax_m.invert_yaxis()
    ax_m.set_xlabel("MiB per rank (high-water)")
    ax_m.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3)
    ax_m.set_title("memory")
    fig.suptitle(f"offload benchmark: {provenance}", fontsize=9)
    png = os.path.join(args.dir, "offload_bench.png")
    fig.savefig(png, dpi=110)
    print(f"\ntable: {out}\nplot:  {png}")


if __name__ == "__main__":
    main()
