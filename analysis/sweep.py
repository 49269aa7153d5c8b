#!/usr/bin/env python3
"""Aggregates one sweep made by scripts/slurm/sweep.sh.

    /usr/bin/python3 analysis/sweep.py SWEEP_DIR [--csv OUT.csv]

Reads SWEEP_DIR/points.tsv and each point's point_<i>/metrics.h5, and writes
SWEEP_DIR/sweep_runs.csv (one row per run: the point, its step time, figure of
merit, validity, and where it ran: job id, array task, cluster, nodes, commit,
date) and SWEEP_DIR/sweep.csv (one row per point over its repeats: median step
time and FOM, their spread min..max, runs done and failed). Prints the table.
A point whose run failed (no metrics file, or an incomplete one) is counted as
failed, never averaged in. Exactly one sweep directory: sweeps are not mixed.
"""
import argparse
import csv
import os
import statistics
import sys

import h5py
import numpy as np


def attr(f, key, default=""):
    v = f.attrs.get(key, default)
    return v.decode() if isinstance(v, bytes) else v


def read_run(path):
    """One run's row fields from its metrics file (None when missing or incomplete)."""
    if not os.path.exists(path):
        return None
    with h5py.File(path, "r") as f:
        if attr(f, "complete", "true") != "true":
            return None
        w = int(f.attrs["warmup_steps"])
        step = f["timings/step"][w:].max(axis=1)  # the slowest rank per measured step
        return {
            "step_s": float(np.mean(step)),
            "fom_tokens_per_s_per_rank": float(f.attrs["fom"]),
            "valid": attr(f, "valid"),
            "job_id": attr(f, "SLURM_ARRAY_JOB_ID") or attr(f, "SLURM_JOB_ID") or "local",
            "array_task": attr(f, "SLURM_ARRAY_TASK_ID"),
            "cluster": attr(f, "clustername"),
            "nodes": attr(f, "numhosts"),
            "commit": attr(f, "git_commit"),
            "date": attr(f, "launchdate"),
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", nargs="+", help="the sweep directory (one)")
    ap.add_argument("--csv", help="the per-point table (default SWEEP_DIR/sweep.csv)")
    a = ap.parse_args()
    if len(a.sweep) != 1:
        sys.exit("sweep.py: give one sweep directory: sweeps of different decks or machines are not mixed")
    sweep = a.sweep[0]
    points_file = os.path.join(sweep, "points.tsv")
    if not os.path.exists(points_file):
        sys.exit(f"sweep.py: {points_file} not found: not a directory made by scripts/slurm/sweep.sh")
    with open(points_file) as fh:
        points = list(csv.DictReader(fh, delimiter="\t"))
    runs = []
    for p in points:
        r = read_run(os.path.join(sweep, f"point_{p['index']}", "metrics.h5"))
        row = {k: p[k] for k in ("index", "ranks", "seq_len", "strategy", "repeat")}
        row.update(r if r else {"valid": "FAILED (no complete metrics file)"})
        runs.append(row)
    fields = ["index", "ranks", "seq_len", "strategy", "repeat", "step_s", "fom_tokens_per_s_per_rank", "valid",
              "job_id", "array_task", "cluster", "nodes", "commit", "date"]
    with open(os.path.join(sweep, "sweep_runs.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(runs)

    groups = {}
    for r in runs:
        groups.setdefault((int(r["ranks"]), int(r["seq_len"]), r["strategy"]), []).append(r)
    table = []
    for (ranks, S, strategy), rs in sorted(groups.items()):
        ok = [r for r in rs if r["valid"] == "PASSED"]
        t = [r["step_s"] for r in ok]
        fom = [r["fom_tokens_per_s_per_rank"] for r in ok]
        first = ok[0] if ok else {}
        table.append({
            "ranks": ranks, "seq_len": S, "strategy": strategy, "runs": len(ok), "failed": len(rs) - len(ok),
            "step_s_median": statistics.median(t) if t else "", "step_s_min": min(t) if t else "",
            "step_s_max": max(t) if t else "",
            "fom_median": statistics.median(fom) if fom else "",
            "job_ids": " ".join(sorted({r["job_id"] for r in ok})), "cluster": first.get("cluster", ""),
            "nodes": first.get("nodes", ""), "commit": first.get("commit", ""), "date": first.get("date", ""),
        })
    out = a.csv or os.path.join(sweep, "sweep.csv")
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(table[0].keys()) if table else ["ranks"])
        w.writeheader()
        w.writerows(table)
    print(f"{'ranks':>5} {'seq_len':>8} {'strategy':<8} {'runs':>4} {'failed':>6} {'step s (median)':>15} "
          f"{'spread':>17} {'FOM':>10}  job ids")
    for row in table:
        med = f"{row['step_s_median']:.4f}" if row["runs"] else "-"
        spread = f"{row['step_s_min']:.4f}..{row['step_s_max']:.4f}" if row["runs"] else "-"
        fom = f"{row['fom_median']:.1f}" if row["runs"] else "-"
        print(f"{row['ranks']:>5} {row['seq_len']:>8} {row['strategy']:<8} {row['runs']:>4} {row['failed']:>6} "
              f"{med:>15} {spread:>17} {fom:>10}  {row['job_ids']}")
    print(f"table: {out}\nruns:  {os.path.join(sweep, 'sweep_runs.csv')}")
    return 0 if all(r["failed"] == 0 for r in table) else 1


if __name__ == "__main__":
    sys.exit(main())
