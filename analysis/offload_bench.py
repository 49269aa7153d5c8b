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
"""
import argparse
import glob
import os
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

MiB = 2.0 ** 20
ORDER = ["full", "checkpoint", "checkpoint_offload", "offload_0", "offload_0.5", "offload_1", "offload_auto"]


def mean_measured(f, phase):
    """Mean over measured steps of the slowest rank's seconds in a phase."""
    w = int(f.attrs["warmup_steps"])
    return float(f["timings"][phase][w:].max(axis=1).mean())


def load(path):
    f = h5py.File(path, "r")
    a = f.attrs
    row = {
        "run": os.path.basename(path)[:-3],
        "policy": str(a["memory_policy"]),
        "alpha": float(a["offload_alpha"]) if "offload_alpha" in a else float("nan"),
        "alpha_mode": str(a["offload_alpha_mode"]) if "offload_alpha_mode" in a else "",
        "cap_gbs": float(a.get("offload_bandwidth_cap_gbs", 0.0)),
        "measured_gbs": float(a.get("offload_bandwidth_measured_gbs", 0.0)),
        "seq_len": int(a["seq_len"]),
        "step_s": mean_measured(f, "step"),
        "wait_s": mean_measured(f, "offload_wait"),
        "recompute_s": mean_measured(f, "recompute"),
        "copy_busy_s": mean_measured(f, "copy_engine_busy"),
    }
    for c in ("activations", "device_total", "host_offload"):
        row[c + "_mib"] = int(f["memory"][c][:].max()) / MiB
        row[c + "_model_mib"] = int(f["memory"]["model"][c][:].max()) / MiB if "model" in f["memory"] else float("nan")
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--device-mib", type=float, default=0.0, help="the device budget of the longest-sequence runs")
    args = ap.parse_args()
    paths = sorted(p for p in glob.glob(os.path.join(args.dir, "*.h5")) if not p.endswith("offload_bench.h5"))
    if not paths:
        sys.exit(f"error: no metrics files in {args.dir}")
    rows = {r["run"]: r for r in map(load, paths)}
    key = lambda n: (n.startswith("longest"), n.endswith("throttled"), ORDER.index(n.replace("_throttled", ""))
                     if n.replace("_throttled", "") in ORDER else 99, n)
    names = sorted(rows, key=key)
    full = rows.get("full")

    print(f"{'run':30s} {'S':>6s} {'alpha':>6s} {'cap GB/s':>8s} {'step s':>8s} {'/full':>6s} {'wait %':>6s} "
          f"{'recomp s':>8s} {'copy s':>7s} {'act MiB':>8s} {'dev MiB':>8s} {'host MiB':>8s}")
    for n in names:
        r = rows[n]
        ratio = r["step_s"] / full["step_s"] if full and r["seq_len"] == full["seq_len"] else float("nan")
        print(f"{n:30s} {r['seq_len']:6d} {r['alpha']:6.3f} {r['cap_gbs']:8.3f} {r['step_s']:8.3f} {ratio:6.3f} "
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
        h.create_dataset("run", data=np.array(names, dtype="S"))
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
    png = os.path.join(args.dir, "offload_bench.png")
    fig.savefig(png, dpi=110)
    print(f"\ntable: {out}\nplot:  {png}")


if __name__ == "__main__":
    main()
