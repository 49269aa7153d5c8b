#!/usr/bin/env python3
"""Aggregates one sweep made by scripts/slurm/sweep.sh.

    /usr/bin/python3 analysis/sweep.py SWEEP_DIR [--csv OUT.csv] [--plot OUT.png]

Reads SWEEP_DIR/points.tsv and each point's metrics file in point_<i>/ (found by
its schema attribute: metrics.h5 in older sweeps, the program's own name now),
and writes SWEEP_DIR/sweep_runs.csv (one row per run: the point, its step time,
figure of merit, the verdict (VALID, INVALID or INCOMPLETE, as the RESULT line
spells it, with the reason), the run rules' verdict, and where it ran: job id,
array task, cluster, nodes, commit, date) and SWEEP_DIR/sweep.csv (one row per
point over its repeats: median step time and FOM, their spread min..max, runs
done and failed, reportable). Prints the table. A point whose run failed (no
metrics file, an incomplete or an INVALID one) is counted as failed, never averaged in.
--plot draws analysis/compare.py's figure of the sweep (tokens/s and efficiency
against ranks, the phases), titled with machine, dates, commit and jobs.

Several sweep directories (other machines, commits or decks) are compared side
by side by analysis/compare.py, which this hands them to.
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import stop_signals  # noqa: E402,F401  (first: a stop signal ends this script with a line and exit 4)

import argparse
import csv
import io
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import minilst_metrics as mm  # noqa: E402


def read_run(path):
    """One run's row fields from its metrics file: its verdict spelled as the RESULT line spells it (VALID,
    INVALID, INCOMPLETE), and for a complete run its numbers."""
    if not path:
        return {"verdict": "INCOMPLETE", "reason": "no metrics file", "reportable": "?"}
    run = mm.load(path)
    a = run.attrs
    v = mm.verdict(a)
    if v == "INCOMPLETE":
        return {"verdict": v, "reason": mm.text(a, "stop_reason", "stopped early"), "reportable": mm.reportable(a)}
    return {
        "step_s": mm.step_time(run),  # the slowest rank per measured step, mean over the measured steps
        "fom_tokens_per_s_per_rank": float(a["fom"]),
        "verdict": v,
        "reason": "" if v == "VALID" else f"reference check {mm.text(a, 'reference_check', '?')}",
        "reportable": mm.reportable(a),
        "job_id": mm.job_id(a),
        "array_task": mm.text(a, "SLURM_ARRAY_TASK_ID"),
        "cluster": mm.text(a, "SLURM_CLUSTER_NAME") or mm.text(a, "clustername"),  # Slurm's name, else Adiak's
        "nodes": mm.text(a, "numhosts"),
        "commit": mm.text(a, "git_commit"),
        "date": mm.text(a, "launchdate_utc") or mm.text(a, "launchdate"),  # launchdate: seconds since the epoch
    }


def delegate(a):
    """Several sweeps: analysis/compare.py puts them side by side, as if called with the same arguments."""
    print(f"sweep.py: {len(a.sweep)} sweep directories: comparing them side by side with analysis/compare.py",
          file=sys.stderr)
    return compare.main(a.sweep + (["--csv", a.csv] if a.csv else []) + (["--plot", a.plot] if a.plot else []))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", nargs="+", help="the sweep directory (several: compared by analysis/compare.py)")
    ap.add_argument("--csv", help="the per-point table (default SWEEP_DIR/sweep.csv)")
    ap.add_argument("--plot", metavar="OUT.png", help="tokens/s and efficiency against ranks, the phases")
    a = ap.parse_args()
    if getattr(a, 'csv', None) and mm.output_problem(a.csv, '--csv'):  # checked before any work
        sys.exit(f"sweep.py: error: {mm.output_problem(a.csv, '--csv')}")
    if len(a.sweep) != 1:
        return delegate(a)
    sweep = a.sweep[0]
    if not mm.is_sweep(sweep):
        sys.exit(f"sweep.py: {os.path.join(sweep, 'points.tsv')} not found: not a directory made by "
                 "scripts/slurm/sweep.sh (for single runs or job directories: analysis/compare.py)")
    runs = []
    for p in mm.sweep_points(sweep):
        row = {k: p[k] for k in ("index", "ranks", "seq_len", "strategy", "repeat")}
        row.update(read_run(p["metrics"]))
        runs.append(row)
    fields = ["index", "ranks", "seq_len", "strategy", "repeat", "step_s", "fom_tokens_per_s_per_rank", "verdict",
              "reason", "reportable", "job_id", "array_task", "cluster", "nodes", "commit", "date"]
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=fields, restval="")
    w.writeheader()
    w.writerows(runs)
    mm.write_text_output(os.path.join(sweep, "sweep_runs.csv"), text.getvalue(), "sweep_runs.csv")

    groups = {}
    for r in runs:
        groups.setdefault((int(r["ranks"]), int(r["seq_len"]), r["strategy"]), []).append(r)
    table = []
    for (ranks, S, strategy), rs in sorted(groups.items()):
        ok = [r for r in rs if r["verdict"] == "VALID"]
        t = [r["step_s"] for r in ok]
        fom = [r["fom_tokens_per_s_per_rank"] for r in ok]
        first = ok[0] if ok else {}
        table.append({
            "ranks": ranks, "seq_len": S, "strategy": strategy, "runs": len(ok), "failed": len(rs) - len(ok),
            "step_s_median": statistics.median(t) if t else "", "step_s_min": min(t) if t else "",
            "step_s_max": max(t) if t else "",
            "fom_median": statistics.median(fom) if fom else "", "reportable": mm.pooled_reportable([r["reportable"] for r in ok]),
            "job_ids": " ".join(sorted({r["job_id"] for r in ok})), "cluster": first.get("cluster", ""),
            "nodes": first.get("nodes", ""), "commit": first.get("commit", ""), "date": first.get("date", ""),
        })
    out = a.csv or os.path.join(sweep, "sweep.csv")
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=list(table[0].keys()) if table else ["ranks"])
    w.writeheader()
    w.writerows(table)
    mm.write_text_output(out, text.getvalue(), "--csv")
    print(f"{'ranks':>5} {'seq_len':>8} {'strategy':<8} {'runs':>4} {'failed':>6} {'step s (median)':>15} "
          f"{'spread':>17} {'FOM':>10} {'reportable':>10}  job ids")
    for row in table:
        med = f"{row['step_s_median']:.4f}" if row["runs"] else "-"
        spread = f"{row['step_s_min']:.4f}..{row['step_s_max']:.4f}" if row["runs"] else "-"
        fom = f"{row['fom_median']:.1f}" if row["runs"] else "-"
        print(f"{row['ranks']:>5} {row['seq_len']:>8} {row['strategy']:<8} {row['runs']:>4} {row['failed']:>6} "
              f"{med:>15} {spread:>17} {fom:>10} {row['reportable']:>10}  {row['job_ids']}")
    print(f"table: {out}\nruns:  {os.path.join(sweep, 'sweep_runs.csv')}")
    if a.plot:
        compare.plot(a.plot, compare.analyse([sweep]))
        print(f"plot:  {a.plot}")
    return 0 if all(r["failed"] == 0 for r in table) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except mm.MetricsError as e:  # an output refused (minilst_metrics: its rule), one line
        print(f"sweep.py: error: {e}", file=sys.stderr)
        sys.exit(2)
