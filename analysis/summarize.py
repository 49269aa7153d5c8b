#!/usr/bin/env python3
"""Summarize miniLST metrics files: per-file phase and memory tables, a comparison table, CSV, plot.

    /usr/bin/python3 analysis/summarize.py FILE.h5 [FILE.h5 ...] [--csv out.csv] [--plot out.png]

Runs are named by what they are (deck, layout, ranks, sequence length, job), not by file name. To put
machines, commits or sweeps side by side, with repeats, speed-up and efficiency: analysis/compare.py.
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import stop_signals  # noqa: E402,F401  (first: a stop signal ends this script with a line and exit 4)

import argparse
import math
import os
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilst_metrics as mm  # noqa: E402

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", None)
pd.set_option("display.max_colwidth", 60)


def phase_order(phases):
    """step, the disjoint top-level phases, the nested ones, then anything new (sorted)."""
    known = ["step", *mm.TOP_LEVEL, *mm.NESTED]
    return [p for p in known if p in phases] + sorted(p for p in phases if p not in known)


def nesting(phase):
    if phase == "step":
        return "-"
    if phase in mm.TOP_LEVEL:
        return "step"
    return mm.NESTED.get(phase, "?")


def fmt(v, spec=".4g"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, (float, np.floating)) and spec == ".4g" and 1e3 <= abs(v) < 1e9:
        return f"{v:.1f}"
    return format(v, spec) if isinstance(v, (int, float, np.number)) else str(v)


def header(run):
    a, c = run.attrs, run.cfg
    m = run.measured
    git = str(a.get("git_commit", "?"))[:8] + (" (dirty)" if str(a.get("git_dirty")).lower() == "true" else "")
    tput = run.throughput.get("model_tflops")
    tflops = float(np.mean(tput[m])) if tput is not None and m.any() else np.nan
    model = run.config.get("model") or {}
    params = a.get("parameters")
    verdict = mm.reportable(a) + (f" ({a['reportable_reasons']})" if a.get("reportable_reasons") else "")
    lines = [
        f"== {mm.run_label(run)}   {mm.verdict(a)}   reportable: {verdict}",
        f"   {run.path} (schema v{a.get('schema_version', '?')})",
        f"   fom {fmt(a.get('fom'), '.1f')} {a.get('fom_unit', '')} "
        f"(tokens per rank / mean slowest-rank step time)",
        f"   {run.ranks} rank(s) on {a.get('hostname', '?')} (cluster {a.get('clustername', '?')}) | "
        f"git {git} | {a.get('compiler', '?')} {a.get('cmake_build_type', '')} | "
        f"Kokkos {a.get('kokkos_version', '?')} {a.get('kokkos_devices', '')} | {mm.date(a)}",
        "   model " + " ".join(f"{k}={v}" for k, v in model.items() if k in
                               ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab"))
        + (f" ({int(params):,} params)" if isinstance(params, (int, float)) else "")
        + f" | seq {fmt(a.get('seq_len', c('run', 'seq_len')), '.0f')} x grad_accum {fmt(a.get('grad_accum'), '.0f')}"
        + f" | {a.get('precision', c('run', 'precision', '?'))} | memory.policy {a.get('memory_policy', '?')}"
        + (f" | ZeRO stage {int(a['zero_stage'])}" if "zero_stage" in a else "")
        + (" + optimizer offload" if a.get("optimizer_offload") == "true" else ""),
        f"   steps {run.steps}, warm-up {run.warmup} -> {int(m.sum())} measured | "
        f"final loss {fmt(run.loss[-1] if len(run.loss) else None, '.6f')} | "
        f"model {fmt(tflops, '.4g')} TFLOP/s (all ranks, measured mean)"
        + (f" | MFU {float(a['mfu']):.3f} of the measured GEMM rate ({float(a['peak_gflops_per_rank']):.1f} GFLOP/s "
           f"per rank)" if "mfu" in a and "peak_gflops_per_rank" in a else ""),
    ]
    return "\n".join(lines)


def phase_table(run):
    st = mm.phase_stats(run)
    step = st["avg"].get("step", np.nan)
    scale, unit = (1.0, "s") if not step < 1.0 else (1e3, "ms")
    t = pd.DataFrame({"inside": [nesting(p) for p in phase_order(st.index)]}, index=phase_order(st.index))
    for col, name in (("avg", "avg"), ("min", "min rank"), ("max", "max rank")):
        t[f"{name} {unit}/step"] = (st[col] * scale).map(lambda v: fmt(v, ".4g"))
    t["% of step"] = st["pct_step"].map(lambda v: fmt(v, ".1f"))
    t.index.name = "phase"
    return t


def memory_table(run):
    cats = [c for c in (*mm.DEVICE_MEMORY, "host_offload", "device_total") if c in run.memory]
    cats += sorted(c for c in run.memory if c not in cats)
    t = pd.DataFrame(index=pd.Index(cats, name="category"))
    t["MiB (max rank)"] = [run.memory[c].max() / mm.MIB for c in cats]
    if run.ranks > 1 and any(run.memory[c].min() != run.memory[c].max() for c in cats):
        t["MiB (min rank)"] = [run.memory[c].min() / mm.MIB for c in cats]
    if run.model_memory:
        t["model MiB"] = [run.model_memory[c].max() / mm.MIB if c in run.model_memory else np.nan for c in cats]
        t["measured/model"] = t["MiB (max rank)"] / t["model MiB"].replace(0, np.nan)
    dev = [c for c in mm.DEVICE_MEMORY if c in run.memory]
    t.loc["(sum of device categories)", "MiB (max rank)"] = sum(run.memory[c].max() for c in dev) / mm.MIB
    return t.apply(lambda col: col.map(lambda v: fmt(v, ".3f")))


def notes(run):
    """Consistency checks between the datasets and the attributes; one line each."""
    out, m, st = [], run.measured, mm.phase_stats(run)
    bad = [p for p in st.index if not np.isnan(st.at[p, "file_avg"])
           and not np.isclose(st.at[p, "avg"], st.at[p, "file_avg"], rtol=1e-6)]
    if bad:
        out.append(f"'Avg time/rank' attribute disagrees with the data for: {', '.join(bad)}")
    if m.any() and "fom" in run.attrs and "tokens_per_step" in run.attrs and mm.step_time(run) > 0:
        # fom = tokens of a step / ranks / mean over measured steps of the slowest rank's step time
        fom = float(run.attrs["tokens_per_step"]) / run.ranks / mm.step_time(run)
        if not np.isclose(fom, run.attrs["fom"], rtol=1e-6):
            out.append(f"fom {run.attrs['fom']:.1f} != tokens_per_step/ranks/mean step time {fom:.1f}")
    if "step" in st.index and all(p in st.index for p in mm.TOP_LEVEL):
        rest = st.at["step", "avg"] - st.loc[list(mm.TOP_LEVEL), "avg"].sum()
        if abs(rest) > 0.02 * st.at["step", "avg"]:
            what = "in no top-level phase (untimed)" if rest > 0 else "counted twice (phases overlap?)"
            out.append(f"step - (forward+backward+comm+optimizer) = {rest:.4g} s: "
                       f"{100 * abs(rest) / st.at['step', 'avg']:.1f}% of the step {what}")
    dev = [c for c in mm.DEVICE_MEMORY if c in run.memory]
    if "device_total" in run.memory and dev:
        over = run.memory["device_total"] - sum(run.memory[c] for c in dev)
        if (over > 0).any():
            out.append(f"device_total exceeds the sum of category high-waters by {over.max() / mm.MIB:.3f} MiB")
    t = run.timings.get("step")
    if run.warmup == 0 and t is not None and t.shape[0] > 2 and t[0].max() > 1.5 * np.median(t[1:].max(axis=1)):
        out.append(f"no warm-up excluded and step 0 is {t[0].max() / np.median(t[1:].max(axis=1)):.1f}x "
                   "the median step: it is in every mean above (set run.warmup_steps >= 1)")
    if len(run.loss) and not np.all(np.isfinite(run.loss)):
        out.append("non-finite loss")
    return out


def labels(runs):
    """Tick labels: what each run is, on two lines (the same run twice: #1, #2)."""
    names = mm.unique_labels([mm.run_label(r) for r in runs])
    return [f"{n.replace(' job ', chr(10) + 'job ')}\n{r.attrs.get('memory_policy', '?')}" for n, r in zip(names, runs)]


def plot(runs, path, relative=False):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stats = [mm.phase_stats(r)["avg"] for r in runs]
    steps = np.array([s.get("step", np.nan) for s in stats])
    totals = np.array([r.memory.get("device_total", np.full(1, np.nan)).max() / mm.MIB for r in runs])
    # Very different scales (e.g. tiny and default decks) make absolute bars unreadable: show fractions.
    relative = relative or bool(np.nanmax(steps) > 20 * np.nanmin(steps) or
                                np.nanmax(totals) > 20 * np.nanmin(totals))
    big = np.nanmax(steps) >= 1.0
    scale, unit = (1.0, "s") if big else (1e3, "ms")
    tnorm = 100.0 / (steps * scale) if relative else np.ones(len(runs))
    mnorm = 100.0 / totals if relative else np.ones(len(runs))
    tlab, mlab = ("% of step time", "% of device_total") if relative else (f"{unit} / step", "MiB")
    x = np.arange(len(runs))
    fig, axes = plt.subplots(1, 3, figsize=(max(15.0, 6 + 3.2 * len(runs)), 5.5), constrained_layout=True)
    colors = plt.get_cmap("tab10").colors

    ax = axes[0]  # disjoint phases stacked up to the step time
    bottom = np.zeros(len(runs))
    parts = [p for p in mm.TOP_LEVEL if any(p in s for s in stats)]
    for i, p in enumerate(parts + ["other (untimed)"]):
        if p.startswith("other"):
            v = np.array([max(s.get("step", 0) - s.reindex(parts).fillna(0).sum(), 0) for s in stats]) * scale
        else:
            v = np.array([s.get(p, 0) for s in stats]) * scale
        v = v * tnorm
        ax.bar(x, v, 0.6, bottom=bottom, label=p, color="lightgrey" if p.startswith("other") else colors[i])
        bottom += v
    for xi, top, st in zip(x, bottom, steps * scale):
        ax.text(xi, top, f"{fmt(st, '.3g')} {unit}", ha="center", va="bottom", fontsize=8)
    ax.set_title("Step time: disjoint phases (stacked)\nmean per measured step, avg over ranks")
    ax.set_ylabel(tlab)
    ax.legend(fontsize=8, loc="upper left", ncol=2, title="forward includes lm_head fwd+bwd", title_fontsize=7)

    ax = axes[1]  # nested phases, side by side: they overlap their parents and each other
    nested = [p for p in (*mm.NESTED, *sorted({p for s in stats for p in s.index} - set(mm.NESTED)
                                                - set(mm.TOP_LEVEL) - {"step"})) if any(p in s for s in stats)]
    w = 0.8 / max(len(nested), 1)
    for i, p in enumerate(nested):
        v = np.array([s.get(p, 0) for s in stats]) * scale * tnorm
        ax.bar(x - 0.4 + w * (i + 0.5), v, w, label=f"{p} (in {mm.NESTED[p]})" if p in mm.NESTED else f"{p} (nesting unknown)",
               color=colors[(4 + i) % 10], hatch="//", edgecolor="white")
    ax.set_title("Nested phases (not additive; recompute\nincludes re-run attention)")
    ax.set_ylabel(tlab)
    ax.legend(fontsize=8, loc="upper left", ncol=2)

    ax = axes[2]  # memory high-water per category; device_total is the concurrent peak
    cats = [c for c in mm.DEVICE_MEMORY if any(c in r.memory for r in runs)]
    has_model = any(r.model_memory for r in runs)
    wm = 0.38 if has_model else 0.6
    for j, (src, off, hatch) in enumerate([("memory", -wm / 2 if has_model else 0, None),
                                           ("model_memory", wm / 2, "xx")][: 1 + has_model]):
        bottom = np.zeros(len(runs))
        for i, c in enumerate(cats):
            v = np.array([getattr(r, src).get(c, np.zeros(1)).max() / mm.MIB for r in runs]) * mnorm
            ax.bar(x + off, v, wm, bottom=bottom, color=colors[i], hatch=hatch, edgecolor="white",
                   label=c if j == 0 else None)
            bottom += v
    for xi, top, t in zip(x, bottom, totals):
        ax.text(xi, top, f"{t:.4g} MiB" if relative else "", ha="center", va="bottom", fontsize=8)
    ax.scatter(x - (wm / 2 if has_model else 0), totals * mnorm, marker="_", s=900, color="black", zorder=3,
               label="device_total (concurrent peak)")
    ax.set_title("Device memory high-water, max over ranks" + ("\n(left measured, right hatched: model)"
                                                               if has_model else "\n(per-category peaks stacked)"))
    ax.set_ylabel(mlab)
    ax.legend(fontsize=8, loc="upper left", ncol=2, markerscale=0.35)
    for ax in axes:
        ax.set_ylim(0, ax.get_ylim()[1] * 1.4)  # room for the legend above the bars
        ax.set_xticks(x)
        ax.set_xticklabels(labels(runs), fontsize=8)
    fig.suptitle(mm.provenance(runs) + ("\nnormalized per file (absolute step time / device_total printed on the "
                                        "bars)" if relative else ""), fontsize=10)
    mm.save_figure(fig, path, "--plot", dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", metavar="FILE.h5")
    ap.add_argument("--csv", help="write the comparison table (summary_frame) here")
    ap.add_argument("--plot", help="write a PNG: phase times and device memory per file")
    ap.add_argument("--relative", action="store_true",
                    help="plot %% of step time / of device_total (automatic when files differ > 20x)")
    args = ap.parse_args(argv)
    if getattr(args, 'csv', None) and mm.output_problem(args.csv, '--csv'):  # checked before any work
        sys.exit(f"summarize.py: error: {mm.output_problem(args.csv, '--csv')}")
    if getattr(args, 'plot', None) and mm.output_problem(args.plot, '--plot'):  # checked before any work
        sys.exit(f"summarize.py: error: {mm.output_problem(args.plot, '--plot')}")
    loaded, failed = load_all(args.files)
    runs = []
    for run in loaded:
        try:
            text = report(run)
        except Exception as e:  # noqa: BLE001 (a file that loads but holds values no table can show)
            print(f"summarize.py: error: {run.path}: cannot summarize: {mm.one_line(e)}", file=sys.stderr)
            failed = True
            continue
        print(text)
        runs.append(run)
    if runs:
        try:
            compare(runs, args)
        except Exception as e:  # noqa: BLE001
            print(f"summarize.py: error: cannot compare the files: {mm.one_line(e)}", file=sys.stderr)
            failed = True
    return 2 if failed else 0


def load_all(paths):
    """The readable runs, and whether any file was not: one line on stderr for each that is not."""
    runs, failed = [], False
    for p in paths:
        try:
            runs.append(mm.load(p))
        except mm.MetricsError as e:
            print(f"summarize.py: error: {e}", file=sys.stderr)
            failed = True
    return runs, failed


def report(run) -> str:
    """One file's header, phase table, memory table and notes, as text (built whole before it is printed)."""
    lines = []
    if run.attrs.get("schema_version", 1) != 1:
        lines.append(f"warning: {run.path}: schema_version {run.attrs.get('schema_version')} (written for 1)")
    lines += [header(run), "", phase_table(run).to_string(), "", memory_table(run).to_string()]
    lines += [f"   note: {n}" for n in notes(run)]
    return "\n".join(lines) + "\n"


def compare(runs, args):
    """The comparison of several files, the CSV and the plot."""
    summary = mm.summary_frame(runs)
    if len(runs) > 1:
        print("== comparison (times: s/step over measured steps; memory: MiB, max over ranks)")
        t = summary.drop(columns=["file"]).set_index("run").T
        print(t.apply(lambda col: col.map(lambda v: fmt(v, ".4g"))).to_string())
        builds = {mm.commit(r.attrs) for r in runs}
        if len(builds) > 1:
            print("   note: the files come from different builds (git_commit, git_dirty): "
                  + ", ".join(f"{n}: {mm.commit(r.attrs)}" for n, r in zip(summary["run"], runs)))
        print("   to compare machines, commits or sweeps with repeats, speed-up and efficiency: analysis/compare.py")
    if args.csv:
        mm.write_text_output(args.csv, summary.to_csv(index=False), "--csv")
        print(f"wrote {args.csv}")
    if args.plot:
        plot(runs, args.plot, args.relative)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except mm.MetricsError as e:  # an output refused (minilst_metrics: its rule), one line
        print(f"summarize.py: error: {e}", file=sys.stderr)
        sys.exit(2)
