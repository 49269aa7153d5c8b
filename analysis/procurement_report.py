#!/usr/bin/env python3
"""Projected beside demonstrated, per system: the table a vendor response includes (docs/procurement.md).

    /usr/bin/python3 analysis/procurement_report.py [--plan [SYSTEM[:DECK]=]PLAN.json ...]
                                                    [--runs [SYSTEM=]PATH ...] [--csv FILE] [--text]

--plan: the JSON of `minilst plan DECK --ranks N --machine MACHINE.yaml --format json` (the projection:
predicted_step_s, predicted_tokens_per_s of all ranks, predicted_mfu; a plan without --machine has none and
shows n/a). SYSTEM defaults to the machine file's name (machine.name), DECK to the JSON's "deck", else the
file's name without .json. --runs: metrics files, job or sweep directories (the metrics files inside; a
directory with none directly inside, as a JUBE run's: those below it), or logs with RESULT lines (each line's
metrics= file is read). SYSTEM defaults to the run's cluster or host.

Rows match on system, deck, ranks, layout (Ulysses x ring x data parallel), sequence length and precision.
Demonstrated: the median tokens/s per rank (the FOM) over the VALID runs of a row, their count and the failed
ones, the run rules' verdict and the tier the runs were granted (RUN_RULES.md); ratio = demonstrated over
projected. Markdown by default (--text: aligned text); --csv writes every column.
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import stop_signals  # noqa: E402,F401  (first: a stop signal ends this script with a line and exit 4)

import argparse
import csv
import io
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilst_metrics as mm  # noqa: E402

KEY = ("system", "deck", "ranks", "layout", "seq_len", "precision")
RESULT = re.compile(r"^RESULT: (VALID|INVALID|INCOMPLETE)\b.* FOM=([-+0-9.eEnaif]+) .*?ranks=(\d+).* metrics=(.*)$")


class UsageError(Exception):
    pass


def split_label(arg):
    """'LABEL=PATH' -> (LABEL, PATH); a path that exists as given keeps its '='."""
    label, eq, path = arg.partition("=")
    return (label, path) if eq and label and not os.path.exists(arg) else (None, arg)


def layout_text(u, r, d):
    return f"U{u} x R{r}" + (f" x D{d}" if d > 1 else "")


# ---------------------------------------------------------------------------------------------------------------
# Projected: plan JSON files.

def read_plan(arg):
    label, path = split_label(arg)
    try:
        with open(path) as f:
            plan = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"--plan {path}: {e}")
    if not isinstance(plan, dict) or "ranks" not in plan or "seq_len" not in plan:
        raise UsageError(f"--plan {path}: not the JSON of `minilst plan DECK --format json` (no ranks, seq_len)")
    system, _, deck = (label or "").partition(":")
    machine = plan.get("machine") if isinstance(plan.get("machine"), dict) else {}
    system = system or machine.get("name") or "?"
    deck = deck or plan.get("deck") or os.path.splitext(os.path.basename(path))[0]
    deck = os.path.splitext(os.path.basename(str(deck)))[0]
    ranks = int(plan["ranks"])
    key = (system, deck, ranks, layout_text(int(plan.get("ulysses", 1)), int(plan.get("ring", 1)),
                                            int(plan.get("data_parallel", 1))),
           int(plan["seq_len"]), str(plan.get("precision", "?")))
    num = lambda k: float(plan[k]) if isinstance(plan.get(k), (int, float)) else float("nan")
    tokens = num("predicted_tokens_per_s")
    return key, dict(projected_step_s=num("predicted_step_s"), projected_tokens_per_s_per_rank=tokens / ranks,
                     projected_mfu=num("predicted_mfu"),
                     machine_file=f"{machine.get('name', '?')} ({machine.get('kind', '?')})" if machine else "none",
                     plan=path)


# ---------------------------------------------------------------------------------------------------------------
# Demonstrated: metrics files, directories and logs.

def run_entry(run, label):
    a = run.attrs
    p = mm.parallel_layout(run)
    key = (label or mm.site(a), mm.deck_name(run), run.ranks, layout_text(p["U"], p["R"], p["D"]),
           int(float(a.get("seq_len", run.cfg("run", "seq_len", 0)))), mm.text(a, "precision", "?"))
    return key, dict(verdict=mm.verdict(a), fom=float(a.get("fom", "nan")), reportable=mm.reportable(a),
                     tier=mm.text(a, "tier", "?").split(" ")[0], device=mm.device(a), commit=mm.commit(a),
                     job=mm.run_job(a), path=run.path)


def files_of(path):
    """The metrics files an argument names (a file, a job or sweep directory) and the RESULT lines of a log."""
    if os.path.isdir(path):
        if mm.is_sweep(path):
            return [p["metrics"] for p in mm.sweep_points(path) if p["metrics"]], []
        found = mm.metrics_files(path)
        if not found:  # a JUBE run (<id>/<wp>_run/work/metrics.h5) or a tree of job directories
            for top, dirs, _ in os.walk(path):  # not through links (JUBE links a step's work to the next)
                dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(top, d)))
                found += [f for d in dirs for f in mm.metrics_files(os.path.join(top, d))]
        return found, []
    if mm.is_metrics_file(path):
        return [path], []
    lines = []
    with open(path, errors="replace") as f:
        for line in f:
            m = RESULT.match(line.strip())
            if m:
                lines.append(m)
    if not lines:
        raise UsageError(f"--runs {path}: neither a metrics file nor a log with RESULT lines")
    return [], lines


def read_runs(arg):
    label, path = split_label(arg)
    if not os.path.exists(path):
        raise UsageError(f"--runs {path}: no such file or directory")
    files, lines = files_of(path)
    out = []
    for m in lines:  # a log: its RESULT lines' metrics files; a line whose file is gone, from the line alone
        metrics = m.group(4).strip()
        metrics = metrics if os.path.isabs(metrics) else os.path.join(os.path.dirname(path), metrics)
        if os.path.isfile(metrics):
            files.append(metrics)
        else:
            out.append(((label or "?", "?", int(m.group(3)), "?", 0, "?"),
                        dict(verdict=m.group(1), fom=float(m.group(2)), reportable="?", tier="?", device="?",
                             commit="?", job="?", path=path)))
    for f in files:
        try:
            out.append(run_entry(mm.load(f), label))
        except mm.MetricsError as e:
            print(f"warning: {e}", file=sys.stderr)
    return out


# ---------------------------------------------------------------------------------------------------------------
# The table.

def pooled(values):
    values = sorted(set(values))
    return values[0] if len(values) == 1 else ", ".join(values) if values else "-"


def rows_of(plans, runs):
    keys = sorted(set(plans) | {k for k, _ in runs}, key=lambda k: tuple(str(v).zfill(12) for v in k))
    rows = []
    for k in keys:
        mine = [r for key, r in runs if key == k]
        valid = [r["fom"] for r in mine if r["verdict"] == "VALID" and r["fom"] == r["fom"]]
        demo = statistics.median(valid) if valid else float("nan")
        proj = plans.get(k, {})
        projected = proj.get("projected_tokens_per_s_per_rank", float("nan"))
        row = dict(zip(KEY, k))
        row.update(projected_tokens_per_s_per_rank=projected, projected_step_s=proj.get("projected_step_s", float("nan")),
                   projected_mfu=proj.get("projected_mfu", float("nan")), machine_file=proj.get("machine_file", "-"),
                   demonstrated_tokens_per_s_per_rank=demo, valid_runs=len(valid), failed_runs=len(mine) - len(valid),
                   demonstrated_over_projected=demo / projected if projected == projected and projected > 0 else float("nan"),
                   reportable=pooled(r["reportable"] for r in mine if r["verdict"] == "VALID"),
                   tier=pooled(r["tier"] for r in mine if r["verdict"] == "VALID"),
                   device=pooled(r["device"] for r in mine), commit=pooled(r["commit"] for r in mine),
                   jobs=pooled(r["job"] for r in mine))
        rows.append(row)
    return rows


def fmt(v, spec):
    if isinstance(v, float):
        return "n/a" if v != v else format(v, spec)
    return str(v)


COLUMNS = [("system", "system", "s"), ("deck", "deck", "s"), ("ranks", "ranks", "d"), ("layout", "layout", "s"),
           ("S", "seq_len", "d"), ("precision", "precision", "s"),
           ("projected tok/s/rank", "projected_tokens_per_s_per_rank", ".4g"),
           ("projected step s", "projected_step_s", ".4g"), ("machine file", "machine_file", "s"),
           ("demonstrated tok/s/rank", "demonstrated_tokens_per_s_per_rank", ".4g"),
           ("runs (failed)", None, "s"), ("demonstrated / projected", "demonstrated_over_projected", ".3f"),
           ("reportable", "reportable", "s"), ("tier", "tier", "s")]


def render(rows, markdown):
    head = [c[0] for c in COLUMNS]
    body = [[f"{r['valid_runs']} ({r['failed_runs']})" if field is None else fmt(r[field], spec)
             for _, field, spec in COLUMNS] for r in rows]
    if markdown:
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"] +
                         ["| " + " | ".join(b) + " |" for b in body])
    width = [max(len(x) for x in col) for col in zip(head, *body)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(line, width)).rstrip() for line in [head] + body)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", action="append", default=[], metavar="[SYSTEM[:DECK]=]PLAN.json")
    ap.add_argument("--runs", action="append", default=[], metavar="[SYSTEM=]PATH")
    ap.add_argument("--csv", metavar="FILE", help="every column, one row per system, deck and point")
    ap.add_argument("--text", action="store_true", help="aligned text instead of Markdown")
    args = ap.parse_args(argv)
    if getattr(args, 'csv', None) and mm.output_problem(args.csv, '--csv'):  # checked before any work
        sys.exit(f"procurement_report.py: error: {mm.output_problem(args.csv, '--csv')}")
    try:
        if not args.plan and not args.runs:
            raise UsageError("give --plan and/or --runs")
        plans = {}
        for p in args.plan:
            key, value = read_plan(p)
            if key in plans:
                raise UsageError(f"--plan {value['plan']}: the same point as {plans[key]['plan']} ({key})")
            plans[key] = value
        runs = [r for a in args.runs for r in read_runs(a)]
    except (UsageError, OSError) as e:
        print(f"procurement_report: {e}", file=sys.stderr)
        return 2
    rows = rows_of(plans, runs)
    print(render(rows, not args.text))
    unpredicted = sum(1 for r in rows if r["machine_file"] != "-" and r["projected_step_s"] != r["projected_step_s"])
    if unpredicted:
        print(f"\nnote: {unpredicted} plan(s) carry no prediction (plan without --machine): projected n/a")
    print("\nprojected: minilst plan --machine (a machine file: nominal from specifications, or probed); "
          "demonstrated: median FOM of the VALID runs (tokens/s per rank over the measured steps, RUN_RULES.md)")
    if args.csv:
        text = io.StringIO(newline="")
        w = csv.DictWriter(text, fieldnames=list(rows[0]) if rows else list(KEY))
        w.writeheader()
        w.writerows(rows)
        mm.write_text_output(args.csv, text.getvalue(), "--csv")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except mm.MetricsError as e:  # an output refused (minilst_metrics: its rule), one line
        print(f"procurement_report.py: error: {e}", file=sys.stderr)
        sys.exit(2)
