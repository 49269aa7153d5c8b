#!/usr/bin/env python3
"""Projected beside demonstrated, per system: the report a vendor response quotes (docs/procurement.md).

    analysis/procurement_report.py [--plan [SYSTEM[:DECK]=]PLAN.json ...] [--runs [SYSTEM=]PATH ...]
                                   [--csv FILE] [--html FILE] [--text] [--model-error E] [--confidence C]

--plan: the JSON of `minilst plan DECK --ranks N --machine MACHINE.yaml --format json` (the projection:
predicted_step_s, predicted_tokens_per_s of all ranks, the predicted MFU in its three conventions; a plan
without --machine has none and shows n/a). SYSTEM defaults to the machine file's name (machine.name), DECK
to the JSON's "deck", else the file's name without .json. --runs: metrics files, job or sweep directories
(the metrics files inside; a directory with none directly inside, as a JUBE run's: those below it), or logs
with RESULT lines (each line's metrics= file is read). SYSTEM defaults to the run's Slurm cluster, else its
host; a host seen under a Slurm cluster is that cluster wherever it appears (one name per system).

Rows match on system, deck, ranks, layout (tensor x Ulysses x ring x data parallel), sequence length and
precision. Demonstrated: over the VALID runs of a row (the FOM: tokens/s per rank over the measured steps),
min, median, max and the confidence interval of the mean (Student's t, --confidence, default 0.95; n/a
below 2 runs); the failed runs counted apart. Projected: the plan's tokens/s per rank with the time model's
stated error (--model-error, default 0.15: a step within +-15%, docs/validation.md), as the range
[p / (1 + E), p / (1 - E)]. MFU in three labelled conventions (model: causal attention halved, recompute not
counted; hardware: recompute counted; square: attention as the full square), each over the run's fixed MFU
peak (its kind: datasheet, machine, host or run) and the plan's machine file's peak. Bound by: the phase
that takes the largest share of the step, measured and predicted. A provenance block per system: dates,
miniLST versions and commits, builds, machine files (name, kind, digest), deck digests, Slurm jobs.

Markdown by default (--text: aligned text); --csv writes every column; --html writes one self-contained
page (tables, plots with titles, units and error bars, provenance) for a browser or a PDF printer.
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import stop_signals  # noqa: E402,F401  (first: a stop signal ends this script with a line and exit 4)

import argparse
import base64
import csv
import datetime
import html
import io
import json
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilst_metrics as mm  # noqa: E402

KEY = ("system", "deck", "ranks", "layout", "seq_len", "precision")
RESULT = re.compile(r"^RESULT: (VALID|INVALID|INCOMPLETE)\b.* FOM=([-+0-9.eEnaif]+) .*?ranks=(\d+).* metrics=(.*)$")
CONVENTIONS = ("model", "hardware", "square")
# The phases a step is made of (not the totals step, forward, backward): the largest bounds the step.
LEAF_PHASES = ("attention", "alltoall", "ring_wait", "tensor_comm", "mlp", "lm_head", "recompute", "offload_wait",
               "prefetch_wait", "grad_reduce", "param_gather", "comm", "optimizer")
HTML_MARK = "<!DOCTYPE html><!-- miniLST procurement report -->"
NAN = float("nan")


class UsageError(Exception):
    pass


def split_label(arg):
    """'LABEL=PATH' -> (LABEL, PATH); a path that exists as given keeps its '='."""
    label, eq, path = arg.partition("=")
    return (label, path) if eq and label and not os.path.exists(arg) else (None, arg)


def layout_text(t, u, r, d):
    return (f"T{t} x " if t > 1 else "") + f"U{u} x R{r}" + (f" x D{d}" if d > 1 else "")


def bound_of(seconds: dict):
    """(phase, share of the step's leaf phases) of the largest leaf phase, or ('-', nan)."""
    leaf = {p: float(v) for p, v in seconds.items() if p in LEAF_PHASES and v == v and float(v) > 0}
    if not leaf:
        return "-", NAN
    phase = max(leaf, key=leaf.get)
    return phase, leaf[phase] / sum(leaf.values())


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
    deck = os.path.splitext(os.path.basename(str(deck or plan.get("deck") or path)))[0]
    ranks = int(plan["ranks"])
    key = (system, deck, ranks, layout_text(int(plan.get("tensor", 1)), int(plan.get("ulysses", 1)),
                                            int(plan.get("ring", 1)), int(plan.get("data_parallel", 1))),
           int(plan["seq_len"]), str(plan.get("precision", "?")))
    num = lambda v: float(v) if isinstance(v, (int, float)) else NAN
    conventions = plan.get("predicted_mfu_conventions") if isinstance(plan.get("predicted_mfu_conventions"), dict) else {}
    phases = plan.get("predicted_phases") if isinstance(plan.get("predicted_phases"), dict) else {}
    bound, share = bound_of({k: num(v) for k, v in phases.items()})
    file_text = (f"{machine.get('name', '?')} ({machine.get('kind', '?')}, {os.path.basename(str(machine.get('file', '?')))}, "
                 f"digest {machine.get('digest', '?')})") if machine else "none"
    return key, dict(projected_step_s=num(plan.get("predicted_step_s")),
                     projected_tokens_per_s_per_rank=num(plan.get("predicted_tokens_per_s")) / ranks,
                     projected_mfu={c: num(conventions.get(c, plan.get("predicted_mfu") if c == "model" else None))
                                    for c in CONVENTIONS},
                     projected_bound=bound, projected_bound_share=share, machine_file=file_text, plan=path,
                     provenance=dict(plan_dates=str(plan.get("created_utc", "?"))[:10],
                                     plan_versions=str(plan.get("minilst_version", "?")),
                                     machine_files=file_text, deck_digests=str(plan.get("deck_digest", "?"))))


# ---------------------------------------------------------------------------------------------------------------
# Demonstrated: metrics files, directories and logs.

def run_entry(run, label):
    a = run.attrs
    p = mm.parallel_layout(run)
    num = lambda k: float(a[k]) if isinstance(a.get(k), (int, float)) else NAN
    stats = mm.phase_stats(run)
    bound, share = bound_of(stats["avg"].to_dict())
    key = [label, mm.deck_name(run), run.ranks, layout_text(int((run.config.get("parallel") or {}).get("tensor", 1) or 1), p["U"], p["R"], p["D"]),
           int(float(a.get("seq_len", run.cfg("run", "seq_len", 0)))), mm.text(a, "precision", "?")]
    build = (f"{mm.text(a, 'cmake_build_type', '?')}, {mm.text(a, 'compiler', '?')}, Kokkos "
             f"{mm.text(a, 'kokkos_version', '?')} {mm.text(a, 'kokkos_devices', '?')}")
    return key, dict(verdict=mm.verdict(a), fom=num("fom"), reportable=mm.reportable(a),
                     tier=mm.text(a, "tier", "?").split(" ")[0], device=mm.device(a), commit=mm.commit(a),
                     job=mm.run_job(a), path=run.path, mfu={c: num(f"mfu_{c}") for c in CONVENTIONS},
                     mfu_peak=mm.text(a, "mfu_peak_kind", "measured in the run (files before the fixed peak)"),
                     node_load=num("node_load_other_cores"), bound=bound, bound_share=share,
                     host=mm.text(a, "hostname", "?").split(".")[0], cluster=mm.text(a, "SLURM_CLUSTER_NAME"),
                     provenance=dict(dates=mm.date(a), versions=f"{mm.text(a, 'version', '?')} ({mm.commit(a)})",
                                     builds=build, deck_digests=mm.text(a, "problem_digest", "?"),
                                     jobs=mm.run_job(a), hosts=mm.text(a, "hostname", "?")))


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
            out.append(([label or "?", "?", int(m.group(3)), "?", 0, "?"],
                        dict(verdict=m.group(1), fom=float(m.group(2)), reportable="?", tier="?", device="?",
                             commit="?", job="?", path=path, mfu={c: NAN for c in CONVENTIONS}, mfu_peak="?",
                             node_load=NAN, bound="-", bound_share=NAN, host="?", cluster="", provenance={})))
    for f in files:
        try:
            out.append(run_entry(mm.load(f), label))
        except mm.MetricsError as e:
            print(f"warning: {e}", file=sys.stderr)
    return out


def name_systems(runs):
    """Each run's system: its label, else its Slurm cluster, else its host, where a host that some run shows
    under a Slurm cluster takes that cluster's name (one system, inside or outside a job)."""
    cluster_of = {r["host"]: r["cluster"] for _, r in runs if r["cluster"]}
    named = []
    for key, r in runs:
        if not key[0]:
            key[0] = r["cluster"] or cluster_of.get(r["host"]) or r["host"]
        named.append((tuple(key), r))
    return named


# ---------------------------------------------------------------------------------------------------------------
# The rows.

def pooled(values):
    values = sorted({str(v) for v in values if str(v) not in ("", "?")})
    return values[0] if len(values) == 1 else ", ".join(values) if values else "-"


def spread(values, confidence):
    """min, median, max, mean and the confidence interval of the mean (Student's t; nan below 2 values)."""
    if not values:
        return dict(min=NAN, median=NAN, max=NAN, mean=NAN, ci_low=NAN, ci_high=NAN)
    mean = statistics.fmean(values)
    low = high = NAN
    if len(values) >= 2:
        from scipy import stats  # Debian: python3-scipy (scripts/setup.sh)
        sem = statistics.stdev(values) / math.sqrt(len(values))
        low, high = stats.t.interval(confidence, len(values) - 1, loc=mean, scale=sem) if sem > 0 else (mean, mean)
    return dict(min=min(values), median=statistics.median(values), max=max(values), mean=mean, ci_low=low, ci_high=high)


def median_of(values):
    values = [v for v in values if v == v]
    return statistics.median(values) if values else NAN


def rows_of(plans, runs, model_error, confidence):
    keys = sorted(set(plans) | {k for k, _ in runs}, key=lambda k: tuple(str(v).zfill(12) for v in k))
    rows = []
    for k in keys:
        mine = [r for key, r in runs if key == k]
        good = [r for r in mine if r["verdict"] == "VALID" and r["fom"] == r["fom"]]
        s = spread([r["fom"] for r in good], confidence)
        proj = plans.get(k, {})
        p = proj.get("projected_tokens_per_s_per_rank", NAN)
        row = dict(zip(KEY, k))
        row.update(projected_tokens_per_s_per_rank=p, projected_low=p / (1 + model_error),
                   projected_high=p / (1 - model_error) if model_error < 1 else math.inf,
                   projected_step_s=proj.get("projected_step_s", NAN), machine_file=proj.get("machine_file", "-"))
        row["demonstrated_tokens_per_s_per_rank"] = s.pop("median")  # the median of the VALID runs' FOMs
        row.update({f"demonstrated_{n}": v for n, v in s.items()})
        row.update(valid_runs=len(good), failed_runs=len(mine) - len(good),
                   demonstrated_over_projected=row["demonstrated_tokens_per_s_per_rank"] / p if p == p and p > 0 else NAN)
        for c in CONVENTIONS:
            row[f"mfu_{c}"] = median_of([r["mfu"][c] for r in good])
            row[f"projected_mfu_{c}"] = proj.get("projected_mfu", {}).get(c, NAN)
        bounds = [r["bound"] for r in good if r["bound"] != "-"]
        row.update(mfu_peak=pooled(r["mfu_peak"] for r in good),
                   bound=max(set(bounds), key=bounds.count) if bounds else "-",
                   bound_share=median_of([r["bound_share"] for r in good if r["bound"] != "-"]),
                   projected_bound=proj.get("projected_bound", "-"), projected_bound_share=proj.get("projected_bound_share", NAN),
                   node_load_max_cores=max([r["node_load"] for r in mine if r["node_load"] == r["node_load"]], default=NAN),
                   reportable=pooled(r["reportable"] for r in good), tier=pooled(r["tier"] for r in good),
                   device=pooled(r["device"] for r in mine), commit=pooled(r["commit"] for r in mine),
                   jobs=pooled(r["job"] for r in mine))
        rows.append(row)
    return rows


def provenance_of(plans, runs):
    """Per system: what its rows came from (every field pooled over its plans and runs)."""
    out = {}
    for system in sorted({k[0] for k in plans} | {k[0] for k, _ in runs}):
        pv = [p["provenance"] for k, p in plans.items() if k[0] == system]
        rv = [r["provenance"] for k, r in runs if k[0] == system and r["provenance"]]
        field = lambda src, name: pooled(x[name] for x in src) if src else "-"
        out[system] = {"run dates (UTC)": field(rv, "dates"), "miniLST version (commit) of the runs": field(rv, "versions"),
                       "builds": field(rv, "builds"), "hosts": field(rv, "hosts"), "Slurm jobs": field(rv, "jobs"),
                       "deck digests": pooled([x["deck_digests"] for x in rv + pv]),
                       "plans made (UTC)": field(pv, "plan_dates"), "miniLST version of the plans": field(pv, "plan_versions"),
                       "machine files (name, kind, file, digest)": field(pv, "machine_files")}
    return out


# ---------------------------------------------------------------------------------------------------------------
# Rendering: Markdown or aligned text, CSV, HTML.

def fmt(v, spec):
    if isinstance(v, float):
        return "n/a" if v != v else format(v, spec)
    return str(v)


def share_text(phase, share):
    return "-" if phase == "-" else f"{phase} {fmt(100 * share, '.0f')}%"


THROUGHPUT = [("system", lambda r: r["system"]), ("deck", lambda r: r["deck"]), ("ranks", lambda r: str(r["ranks"])),
              ("layout", lambda r: r["layout"]), ("S", lambda r: str(r["seq_len"])), ("precision", lambda r: r["precision"]),
              ("projected tok/s/rank [model error]", lambda r: f"{fmt(r['projected_tokens_per_s_per_rank'], '.4g')} "
               f"[{fmt(r['projected_low'], '.4g')}, {fmt(r['projected_high'], '.4g')}]"),
              ("demonstrated median [min, max]", lambda r: f"{fmt(r['demonstrated_tokens_per_s_per_rank'], '.4g')} "
               f"[{fmt(r['demonstrated_min'], '.4g')}, {fmt(r['demonstrated_max'], '.4g')}]"),
              ("CI of the mean", lambda r: f"[{fmt(r['demonstrated_ci_low'], '.4g')}, {fmt(r['demonstrated_ci_high'], '.4g')}]"),
              ("runs (failed)", lambda r: f"{r['valid_runs']} ({r['failed_runs']})"),
              ("demonstrated / projected", lambda r: fmt(r["demonstrated_over_projected"], ".3f")),
              ("bound by: measured / predicted", lambda r: f"{share_text(r['bound'], r['bound_share'])} / "
               f"{share_text(r['projected_bound'], r['projected_bound_share'])}"),
              ("reportable", lambda r: r["reportable"]), ("tier", lambda r: r["tier"])]
MFU = [("system", lambda r: r["system"]), ("deck", lambda r: r["deck"]), ("ranks", lambda r: str(r["ranks"])),
       ("layout", lambda r: r["layout"])] + \
      [(f"MFU {c}: measured / projected", (lambda c: lambda r: f"{fmt(r[f'mfu_{c}'], '.3f')} / "
                                           f"{fmt(r[f'projected_mfu_{c}'], '.3f')}")(c)) for c in CONVENTIONS] + \
      [("measured MFU's peak", lambda r: r["mfu_peak"]), ("machine file (projected MFU's peak)", lambda r: r["machine_file"])]
CONVENTION_NOTE = ("MFU conventions: model = 6 FLOPs per parameter and token + causal attention (half the square), "
                   "recompute not counted; hardware = model + what the memory policy recomputes; square = model with "
                   "attention as the full square. Measured MFU divides by the run's fixed peak (datasheet, machine "
                   "file, or this host's peak measured once and stored), projected MFU by the machine file's peak.")


def table(rows, columns, markdown):
    head = [c[0] for c in columns]
    body = [[f(r) for _, f in columns] for r in rows]
    if markdown:
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"] +
                         ["| " + " | ".join(b) + " |" for b in body])
    width = [max(len(x) for x in col) for col in zip(head, *body)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(line, width)).rstrip() for line in [head] + body)


def render_text(rows, prov, meta, markdown):
    h = "## " if markdown else ""
    parts = [f"{'# ' if markdown else ''}miniLST procurement report", meta, "", f"{h}Throughput (tokens/s per rank)",
             table(rows, THROUGHPUT, markdown), "", f"{h}MFU", table(rows, MFU, markdown), "", CONVENTION_NOTE, "",
             f"{h}Provenance"]
    for system, fields in prov.items():
        parts.append(f"{system}:" if not markdown else f"- **{system}**")
        parts += [f"  - {k}: {v}" if markdown else f"  {k}: {v}" for k, v in fields.items()]
    return "\n".join(parts)


def plot_png(rows, what):
    """A PNG (bytes) of the rows: throughput (projected with the model's error, demonstrated median with the
    confidence interval and min-max) or MFU (three conventions, measured beside projected)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['system']}\n{r['deck']} {r['ranks']}r {r['layout']}" for r in rows]
    x = list(range(len(rows)))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(rows)), 4.2))
    nan0 = lambda v: v if v == v else 0.0
    if what == "throughput":
        p = [r["projected_tokens_per_s_per_rank"] for r in rows]
        perr = [[nan0(v - r["projected_low"]) for v, r in zip(p, rows)], [nan0(r["projected_high"] - v) for v, r in zip(p, rows)]]
        d = [r["demonstrated_tokens_per_s_per_rank"] for r in rows]
        derr = [[nan0(v - r["demonstrated_min"]) for v, r in zip(d, rows)], [nan0(r["demonstrated_max"] - v) for v, r in zip(d, rows)]]
        ax.errorbar([i - 0.12 for i in x], p, yerr=perr, fmt="s", capsize=5, label="projected (time model's error)")
        ax.errorbar([i + 0.12 for i in x], d, yerr=derr, fmt="o", capsize=5, label="demonstrated median (min to max)")
        ci = [(i + 0.12, r["demonstrated_ci_low"], r["demonstrated_ci_high"]) for i, r in zip(x, rows)]
        for i, lo, hi in ci:
            if lo == lo:
                ax.plot([i, i], [lo, hi], lw=6, alpha=0.35, color="C1")
        ax.set_ylabel("tokens/s per rank")
        finite = [v for v in p + d if v == v and v > 0]
        if finite and max(finite) > 20 * min(finite):
            ax.set_yscale("log")  # machines a hundred times apart
        ax.set_title("Throughput: projected beside demonstrated (band: confidence interval of the mean)")
    else:
        for j, c in enumerate(CONVENTIONS):
            ax.bar([i + (j - 1) * 0.27 for i in x], [nan0(r[f"mfu_{c}"]) for r in rows], width=0.25, label=f"measured, {c}")
            ax.plot([i + (j - 1) * 0.27 for i in x], [r[f"projected_mfu_{c}"] for r in rows], "k_", ms=14)
        ax.plot([], [], "k_", ms=14, label="projected (each convention)")
        ax.set_ylabel("MFU (fraction of the peak)")
        ax.set_title("MFU in three conventions: model, hardware, square")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=8)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def render_html(rows, prov, meta):
    esc = html.escape
    def html_table(columns, caption):
        head = "".join(f"<th>{esc(c[0])}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{esc(f(r))}</td>" for _, f in columns) + "</tr>" for r in rows)
        return f"<table><caption>{esc(caption)}</caption><tr>{head}</tr>{body}</table>"
    img = lambda what, alt: (f'<figure><img alt="{esc(alt)}" src="data:image/png;base64,'
                             f'{base64.b64encode(plot_png(rows, what)).decode()}"><figcaption>{esc(alt)}</figcaption></figure>')
    prov_html = "".join(f"<h3>{esc(s)}</h3><dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in f.items())
                        + "</dl>" for s, f in prov.items())
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #999;padding:3px 6px;font-size:13px}caption{font-weight:bold;text-align:left}"
             "dt{font-weight:bold}dd{margin:0 0 .4em 1.5em}")
    return (f"{HTML_MARK}\n<html><head><meta charset=\"utf-8\"><title>miniLST procurement report</title>"
            f"<style>{style}</style></head><body><h1>miniLST procurement report</h1><p>{esc(meta)}</p>"
            f"<h2>Throughput</h2>{html_table(THROUGHPUT, 'Throughput, tokens/s per rank')}"
            f"{img('throughput', 'Throughput per rank: projected (error bars: the time model error) beside demonstrated (error bars: min to max; band: confidence interval)')}"
            f"<h2>MFU</h2>{html_table(MFU, 'MFU in three conventions, measured / projected')}<p>{esc(CONVENTION_NOTE)}</p>"
            f"{img('mfu', 'MFU per convention: bars measured, marks projected')}"
            f"<h2>Provenance</h2>{prov_html}</body></html>\n")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", action="append", default=[], metavar="[SYSTEM[:DECK]=]PLAN.json")
    ap.add_argument("--runs", action="append", default=[], metavar="[SYSTEM=]PATH")
    ap.add_argument("--csv", metavar="FILE", help="every column, one row per system, deck and point")
    ap.add_argument("--html", metavar="FILE", help="one self-contained page: tables, plots, provenance")
    ap.add_argument("--text", action="store_true", help="aligned text instead of Markdown")
    ap.add_argument("--model-error", type=float, default=0.15, metavar="E",
                    help="the time model's stated step-time error (default 0.15: docs/validation.md)")
    ap.add_argument("--confidence", type=float, default=0.95, metavar="C", help="of the interval of the mean (default 0.95)")
    args = ap.parse_args(argv)
    if not 0 <= args.model_error < 1:
        ap.error(f"--model-error {args.model_error}: a fraction in [0, 1)")
    if not 0 < args.confidence < 1:
        ap.error(f"--confidence {args.confidence}: a fraction in (0, 1)")
    for flag in ("csv", "html"):  # checked before any work
        path = getattr(args, flag)
        if path and mm.output_problem(path, f"--{flag}"):
            ap.error(mm.output_problem(path, f"--{flag}"))
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        if not args.plan and not args.runs:
            raise UsageError("give --plan and/or --runs")
        plans = {}
        for p in args.plan:
            key, value = read_plan(p)
            if key in plans:
                raise UsageError(f"--plan {value['plan']}: the same point as {plans[key]['plan']} ({key})")
            plans[key] = value
        runs = name_systems([r for a in args.runs for r in read_runs(a)])
    except (UsageError, OSError) as e:
        print(f"procurement_report: {e}", file=sys.stderr)
        return 2
    rows = rows_of(plans, runs, args.model_error, args.confidence)
    prov = provenance_of(plans, runs)
    meta = (f"Made {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by "
            f"analysis/procurement_report.py from {len(plans)} plan(s) and {len(runs)} run(s); demonstrated: the VALID "
            f"runs' FOM (tokens/s per rank over the measured steps, RUN_RULES.md), {100 * args.confidence:g}% confidence "
            f"interval of the mean (Student's t); projected: minilst plan --machine, range = the time model's stated "
            f"error of {100 * args.model_error:g}% on the step.")
    print(render_text(rows, prov, meta, not args.text))
    unpredicted = sum(1 for r in rows if r["machine_file"] != "-" and r["projected_step_s"] != r["projected_step_s"])
    if unpredicted:
        print(f"\nnote: {unpredicted} plan(s) carry no prediction (plan without --machine): projected n/a")
    if args.csv:
        text = io.StringIO(newline="")
        w = csv.DictWriter(text, fieldnames=list(rows[0]) if rows else list(KEY))
        w.writeheader()
        w.writerows(rows)
        mm.write_text_output(args.csv, text.getvalue(), "--csv")
    if args.html:
        mm.write_text_output(args.html, render_html(rows, prov, meta), "--html")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except mm.MetricsError as e:  # an output refused (minilst_metrics: its rule), one line
        print(f"procurement_report.py: error: {e}", file=sys.stderr)
        sys.exit(2)
