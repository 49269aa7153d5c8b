#!/usr/bin/env python3
"""The published GPU runs against miniLST's predictions: a plot of `minilst validate`'s JSON.

  minilst validate --out validation.json
  analysis/plot_validation.py validation.json [--png FILE]

Left: every predicted time and throughput, predicted against published (log-log), one colour per
table, the +-15% band. Right: every predicted MFU against the published one (points), the +-5 point
band. Prints per table the figures predicted of those published and the mean and largest |error|.
Exit 0; 1 when the file is not validate's JSON.
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import stop_signals  # noqa: E402,F401  (first: a stop signal ends this script with a line and exit 4)

import argparse
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilst_metrics as mm  # noqa: E402


def load(path):
    try:
        data = json.loads(mm.read_text_file(path))
        rows, tables = data["rows"], data["tables"]
        if not isinstance(rows, list) or not isinstance(tables, list):
            raise TypeError("rows and tables are not lists")
    except mm.MetricsError as e:
        sys.exit(f"error: {e}")
    except (ValueError, KeyError, TypeError) as e:
        sys.exit(f"error: {path}: not the JSON of minilst validate ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
    return rows, tables


def summary(tables):
    for t in tables:
        print(f"{t['table']:<18} {t['expressed']:>3} of {t['figures']:>3} predicted; mean |error| "
              f"{100 * t['mean_abs_error']:.1f}%, largest {100 * t['max_abs_error']:.1f}% (limit "
              f"{100 * t['limit']:.0f}%){'' if t['within'] else '  BEYOND ITS LIMIT'}")


def plot(rows, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    by_table = defaultdict(list)
    for r in rows:
        if "error" in r:
            by_table[r["table"]].append(r)
    fig, (ax, am) = plt.subplots(1, 2, figsize=(11, 5))
    lo, hi = float("inf"), 0.0
    for table, rs in sorted(by_table.items()):
        rel = [r for r in rs if r["kind"] != "mfu"]
        if rel:
            # a throughput is plotted as its reciprocal's ratio would be: predicted against published
            x = [r["published"] for r in rel]
            y = [r["predicted"] for r in rel]
            ax.scatter(x, y, label=table, s=18)
            lo, hi = min(lo, *x, *y), max(hi, *x, *y)
        mfu = [r for r in rs if r["kind"] == "mfu"]
        if mfu:
            am.scatter([100 * r["published"] for r in mfu], [100 * r["predicted"] for r in mfu], label=table, s=18)
    if hi > 0:
        line = [lo * 0.8, hi * 1.25]
        ax.plot(line, line, "k-", lw=0.8)
        ax.fill_between(line, [v * 0.85 for v in line], [v * 1.15 for v in line], color="grey", alpha=0.2, label="+-15%")
        ax.set_xscale("log"), ax.set_yscale("log")
    ax.set_xlabel("published (s, tokens/s or TFLOP/s)"), ax.set_ylabel("miniLST's prediction")
    ax.set_title("times and throughputs"), ax.legend(fontsize=7)
    am.plot([0, 100], [0, 100], "k-", lw=0.8)
    am.fill_between([0, 100], [-5, 95], [5, 105], color="grey", alpha=0.2, label="+-5 points")
    am.set_xlim(0, 70), am.set_ylim(0, 70)
    am.set_xlabel("published MFU (%)"), am.set_ylabel("predicted MFU (%)"), am.set_title("MFU (the paper's convention)")
    am.legend(fontsize=7)
    fig.tight_layout()
    mm.save_figure(fig, png, "--png", dpi=120)
    print(f"wrote {png}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json")
    ap.add_argument("--png", help="the plot (default: beside the JSON, .png)")
    a = ap.parse_args()
    png = a.png or (a.json.rsplit(".", 1)[0] + ".png")
    if mm.output_problem(png, "--png"):
        sys.exit(f"error: {mm.output_problem(png, '--png')}")
    rows, tables = load(a.json)
    try:
        summary(tables)
        plot(rows, png)
    except mm.MetricsError as e:
        sys.exit(f"error: {e}")
    except (KeyError, TypeError, ValueError) as e:
        sys.exit(f"error: {a.json}: not the JSON of minilst validate ({type(e).__name__}: {str(e)[:80]})")


if __name__ == "__main__":
    main()
