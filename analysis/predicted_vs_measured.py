#!/usr/bin/env python3
"""Predicted against measured step time, per run and per phase.

  analysis/predicted_vs_measured.py [--png FILE] [--tolerance 0.15] RUN ...

Each RUN is one of
  NAME=PLAN.json,METRICS.h5   the prediction of `minilst plan --machine ... --format json` (its predicted_phases)
  NAME=METRICS.h5             a run made with `--machine FILE` (or run.machine): its own /predicted/<phase>
  METRICS.h5                  the same, named by the file's stem

For each run: the measured seconds per phase are the busiest rank's mean over the measured
steps (the `Max time/rank` attribute of /timings/<phase>, docs/metrics.md); the error is
predicted / measured - 1. Runs given the same NAME (rounds of one configuration, as
scripts/bench/predict_sweep.sh runs them) are read as one: each phase's median over the rounds,
predicted and measured, and the measured step's spread over the rounds (slowest / fastest).
Prints one row per run (the step and each phase that either side puts above 2% of the step), the
share of runs whose step is within the tolerance (with rounds, again over the runs whose rounds
agree within --steady, default 1.10: the machine held still while they ran), and writes a
scatter plot (predicted against measured step time, log-log, the +-tolerance band) when --png
is given. Exit 0 (a report, not a check); 1 when a file has no prediction or cannot be read.
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import stop_signals  # noqa: E402,F401  (first: a stop signal ends this script with a line and exit 4)

import argparse
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilst_metrics import MetricsError, output_problem, read_text_file, read_with, save_figure  # noqa: E402


def _number(v):
    x = float(v)
    if not math.isfinite(x):
        raise MetricsError(f"a value that is not finite ({v})")
    return x


def measured_phases(path):
    """Each phase's busiest-rank mean (the `Max time/rank` attribute of /timings/<phase>), read as load reads."""
    def reader(f):
        if "timings" not in f:
            raise MetricsError(f"{path}: no /timings group: not a run's metrics file")
        t = f["timings"]
        return {k: _number(t[k].attrs["Max time/rank"]) for k in t.keys() if "Max time/rank" in t[k].attrs}
    return read_with(path, reader)


def recorded_prediction(path):
    """The phases a run predicted for itself (/predicted/<phase>, s per step), or None where it has none."""
    def reader(f):
        g = f.get("predicted")
        if g is None or not hasattr(g, "keys"):
            return None
        return {k: _number(g[k][()]) for k in g.keys() if hasattr(g[k], "shape") and g[k].shape == ()}
    return read_with(path, reader)


def read_run(spec):
    """(name, predicted phases, measured phases) of one RUN argument."""
    if os.path.exists(spec) and not os.path.isfile(spec):
        sys.exit(f"error: {spec}: not a regular file (a directory, FIFO or device), not a metrics file")
    if os.path.isfile(spec):  # METRICS.h5 alone (whatever its name holds)
        name, plan_path, comma, h5_path = os.path.splitext(os.path.basename(spec))[0], spec, "", ""
    else:
        name, sep, files = spec.partition("=")
        if not sep:
            sys.exit(f"error: {spec}: no such file (expected METRICS.h5, NAME=METRICS.h5 or NAME=PLAN.json,METRICS.h5)")
        plan_path, comma, h5_path = files.partition(",")
    try:
        if comma:
            plan = json.loads(read_text_file(plan_path))
            if not isinstance(plan, dict) or not isinstance(plan.get("predicted_phases"), dict):
                sys.exit(f"error: {plan_path}: no predicted_phases (run plan with --machine)")
            pred = {k: _number(v) for k, v in plan["predicted_phases"].items()}
        else:
            h5_path = plan_path
            pred = recorded_prediction(h5_path)
            if pred is None:
                sys.exit(f"error: {h5_path}: no /predicted group: run with --machine FILE (or run.machine), "
                         "or give NAME=PLAN.json,METRICS.h5")
        meas = measured_phases(h5_path)
        if meas.get("step", 0) <= 0 or "step" not in pred:
            sys.exit(f"error: {spec}: no measured step (run.warmup_steps < steps done?) or no predicted step")
        return name, pred, meas
    except MetricsError as e:  # one line naming the file already
        sys.exit(f"error: {e}")
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"error: {spec}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")


def combine_rounds(rows):
    """[(name, predicted, measured, rounds, spread)]: the rows sharing a name as one, in the order
    the names first appear: each phase (those every round has) its median over the rounds; spread:
    the slowest round's measured step over the fastest's."""
    groups = {}
    for name, pred, meas in rows:
        groups.setdefault(name, []).append((pred, meas))
    combined = []
    for name, runs in groups.items():
        def phases(side):
            keys = [k for k in runs[0][side] if all(k in r[side] for r in runs)]
            return {k: statistics.median(r[side][k] for r in runs) for k in keys}
        steps = [meas["step"] for _, meas in runs]
        combined.append((name, phases(0), phases(1), len(runs), max(steps) / min(steps)))
    return combined


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="NAME=PLAN.json,METRICS.h5, NAME=METRICS.h5 or METRICS.h5")
    ap.add_argument("--png", help="write the scatter plot here")
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument("--steady", type=float, default=1.10,
                    help="with rounds: the share within the tolerance again over the runs whose measured "
                         "steps' spread (slowest / fastest round) is at most this")
    a = ap.parse_args()
    if getattr(a, 'png', None) and output_problem(a.png, '--png'):  # checked before any work
        sys.exit(f"predicted_vs_measured.py: error: {output_problem(a.png, '--png')}")
    rows = combine_rounds([read_run(spec) for spec in a.runs])
    rounds = max(r[3] for r in rows) > 1
    within = 0
    print(f"{'run':28s} {'step pred':>10s} {'meas':>9s} {'err':>7s}" + (f" {'rounds':>12s}" if rounds else "") +
          "  phases (pred/meas - 1, those above 2% of the step)")
    for name, pred, meas, n_rounds, spread in rows:
        step_p, step_m = pred["step"], meas["step"]
        err = step_p / step_m - 1
        within += abs(err) <= a.tolerance
        parts = []
        for k in pred:  # the phases the prediction prices, in its order
            if k == "step":
                continue
            p, m = pred.get(k, 0.0), meas.get(k, 0.0)
            if max(p, m) < 0.02 * step_m:
                continue
            parts.append(f"{k} {p / m - 1:+.0%}" if m > 0 else f"{k} pred {p:.3g}s/meas 0")
        spread_text = f" {n_rounds:>3d}, x{spread:<6.2f}" if rounds else ""
        print(f"{name:28s} {step_p:10.4g} {step_m:9.4g} {err:+7.1%}{spread_text}  " + ", ".join(parts))
    n = len(rows)
    print(f"within {a.tolerance:.0%}: {within} of {n} runs ({within / n:.0%})")
    if rounds:
        steady = [abs(p["step"] / m["step"] - 1) <= a.tolerance for _, p, m, k, spread in rows if k > 1 and spread <= a.steady]
        print(f"within {a.tolerance:.0%} where the rounds agree within x{a.steady:.2f}: {sum(steady)} of {len(steady)} runs")
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(5.5, 5))
        xs = [m["step"] for _, _, m, _, _ in rows]
        ys = [p["step"] for _, p, _, _, _ in rows]
        ax.scatter(xs, ys)
        for (name, *_), x, y in zip(rows, xs, ys):
            ax.annotate(name, (x, y), fontsize=6)
        lo, hi = min(xs + ys) / 1.5, max(xs + ys) * 1.5
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.fill_between([lo, hi], [lo * (1 - a.tolerance), hi * (1 - a.tolerance)],
                        [lo * (1 + a.tolerance), hi * (1 + a.tolerance)], color="g", alpha=0.15,
                        label=f"within {a.tolerance:.0%}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured step time, s (busiest rank)")
        ax.set_ylabel("predicted step time, s (machine file)")
        ax.set_title(f"predicted vs measured: {within} of {n} within {a.tolerance:.0%}")
        ax.legend(loc="upper left")
        fig.tight_layout()
        save_figure(fig, a.png, "--png", dpi=120)
        print(f"wrote {a.png}")


if __name__ == "__main__":
    try:
        main()
    except MetricsError as e:  # an output refused (minilst_metrics: its rule), one line
        print(f"predicted_vs_measured.py: error: {e}", file=sys.stderr)
        sys.exit(2)
