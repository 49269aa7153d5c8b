#!/usr/bin/env python3
"""Compare sequence-parallel runs (local, Ulysses, ring, hybrid) of one deck: a table, checks, a PNG.

    /usr/bin/python3 analysis/scaling.py DIR_OR_FILE.h5 [...] [--png out.png] [--csv out.csv]

A directory stands for every metrics file in it, found by its schema attribute (scripts/scaling.sh writes
runs/scaling_<time>/); a sweep directory of scripts/slurm/sweep.sh for the metrics files of its points.
Several directories (other machines, commits or sweeps) are handed to analysis/compare.py, which puts them
side by side with repeats, speed-up and efficiency.
Times are mean seconds per measured step: `step` of the slowest rank (what the FOM uses), every
other phase averaged over ranks. Communication is bytes sent to other ranks per step and rank
(mean over steps and ranks), checked against the analytic model stored in the file. Memory is
the high-water per rank, max over ranks.
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import stop_signals  # noqa: E402,F401  (first: a stop signal ends this script with a line and exit 4)

import argparse
import math
import os
import socket
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import minilst_metrics as mm  # noqa: E402

pd.set_option("display.width", 250)
pd.set_option("display.max_columns", None)

PHASES = ("forward", "backward", "attention", "mlp", "lm_head", "alltoall", "ring_wait", "comm")
PLOT_PHASES = ("attention", "mlp", "lm_head", "alltoall", "ring_wait", "comm")
OPS = ("alltoall", "ring", "rsa_allreduce", "allreduce")
MEMORY = ("weights", "gradients", "optimizer", "activations", "workspace", "comm", "device_total")
LOSS_RTOL = 1e-5


class UsageError(Exception):
    pass


def directory_files(d):
    """The metrics files of a directory: a sweep's points' (those that left one), else the files in it."""
    if mm.is_sweep(d):
        return [p["metrics"] for p in mm.sweep_points(d) if p["metrics"]]
    return mm.metrics_files(d)


def expand(args):
    paths = []
    for a in args:
        if os.path.isdir(a):
            found = directory_files(a)
            if not found:
                raise UsageError(f"{a}: no metrics files (HDF5 with schema {mm.SCHEMA}) in this directory")
            paths += found
        elif os.path.exists(a):
            paths.append(a)
        else:
            raise UsageError(f"{a}: no such file or directory")
    if not paths:
        raise UsageError("no metrics files given")
    return paths


def kind(p):
    """(sort order, short name) of the strategy."""
    if p["U"] > 1 and p["R"] > 1:
        return 4, "hybrid"
    if p["R"] > 1:
        return (2 if p["ring_overlap"] == "true" else 3), "ring"
    if p["U"] > 1:
        return 1, "ulysses"
    return 0, "local"


def strategy(p):
    """The file's attention attribute, plus the overlap flag where a ring runs."""
    s = p["attention"]
    if p["R"] > 1 and p["ring_overlap"] != "true":
        s += " no-overlap"
    return s


def label(p, ranks):
    """Short plot label: 'local np1', 'ulysses np4', 'ring z np2', 'hybrid 2x2 np4'."""
    _, k = kind(p)
    ring = ("ring" if p["ring_variant"] == "flash" else f"ring-{p['ring_variant']}") + " " + p["ring_layout"][:1]
    if k == "hybrid":
        s = f"hybrid {p['U']}x{p['R']}" + ("" if p["ring_layout"] == "zigzag" else f" {p['ring_layout'][:1]}")
    elif k == "ring":
        s = ring
    else:
        s = k
    if p["R"] > 1 and p["ring_overlap"] != "true":
        s += " no-ovl"
    if p["D"] > 1:
        s += f" dp{p['D']}"
    return f"{s} np{ranks}"


def deck_key(run):
    """The deck without the parallel and output sections: runs with equal keys do the same math."""
    return repr(sorted((k, repr(v)) for k, v in run.config.items() if k not in ("parallel", "output")))


def truth(v):
    """numpy/pandas booleans as Python True/False (so `is True` works); anything else NaN."""
    return bool(v) if isinstance(v, (bool, np.bool_)) else np.nan


def row(run):
    p = mm.parallel_layout(run)
    st = mm.phase_stats(run)["avg"]
    cs = mm.comm_stats(run)
    mem = lambda c: float(run.memory[c].max()) / mm.MIB if c in run.memory else np.nan
    r = dict(file=os.path.basename(run.path), label=label(p, run.ranks), strategy=strategy(p), order=kind(p)[0],
             ranks=run.ranks, U=p["U"], R=p["R"], D=p["D"], ring_layout=p["ring_layout"],
             ring_variant=p["ring_variant"], ring_overlap=p["ring_overlap"], step_s=mm.step_time(run))
    r.update({f"{ph}_s": float(st.get(ph, np.nan)) for ph in PHASES})
    r["fom"] = float(run.attrs.get("fom", np.nan))
    for op in OPS:
        r[f"{op}_MiB"] = cs.at[op, "bytes"] / mm.MIB if op in cs.index else np.nan
        r[f"{op}_model_MiB"] = cs.at[op, "model"] / mm.MIB if op in cs.index else np.nan
        r[f"{op}_matches_model"] = truth(cs.at[op, "matches"]) if op in cs.index else np.nan
    for c in MEMORY:
        r[f"{c}_MiB"] = mem(c)
    r["final_loss"] = float(run.loss[-1]) if len(run.loss) else np.nan
    r["valid"] = run.attrs.get("valid", "?")
    r["reportable"] = mm.reportable(run.attrs)
    r["job"] = mm.run_job(run.attrs)
    return r


def fmt(v, spec=".4g"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec) if isinstance(v, (int, float, np.number)) and not isinstance(v, bool) else str(v)


def tables(df):
    t = pd.DataFrame(index=pd.Index(df["label"], name="run"))
    t["strategy"] = df["strategy"].values
    for c in ("ranks", "U", "R", "D"):
        t[c] = df[c].values
    for c, name in (("step_s", "step"), ("forward_s", "fwd"), ("backward_s", "bwd"), ("attention_s", "attn"),
                    ("alltoall_s", "a2a"), ("ring_wait_s", "ring_wait"), ("comm_s", "comm")):
        t[name] = df[c].map(lambda v: fmt(v, ".3f")).values
    t["tok/s/rank"] = df["fom"].map(lambda v: fmt(v, ".1f")).values
    t["reportable"] = df["reportable"].values
    times = t

    c = pd.DataFrame(index=pd.Index(df["label"], name="run"))
    for op in OPS:
        c[f"{op} MiB"] = [fmt(v, ".3f") + ("" if m is True or (isinstance(m, float) and math.isnan(m)) else " (!)")
                          for v, m in zip(df[f"{op}_MiB"], df[f"{op}_matches_model"])]
    c["=model"] = ["yes" if all(m is True for m in ms) else "NO"
                   for ms in zip(*(df[f"{op}_matches_model"] for op in OPS))]
    for m, name in (("device_total_MiB", "device_total"), ("activations_MiB", "activations"),
                    ("workspace_MiB", "workspace"), ("comm_MiB", "comm mem")):
        c[name] = df[m].map(lambda v: fmt(v, ".2f")).values
    c["final loss"] = df["final_loss"].map(lambda v: fmt(v, ".7f")).values
    return times, c


def loss_check(runs, df):
    lines = []
    groups = {}
    for run, (_, r) in zip(runs, df.iterrows()):
        groups.setdefault(deck_key(run), []).append((run, r))
    if len(groups) > 1:
        lines.append(f"warning: the files come from {len(groups)} different decks (beyond parallel.*): "
                     "losses are compared within each deck only")
    for members in groups.values():
        if len(members) < 2:
            continue
        ref_run, ref = members[0]
        finals = np.array([r["final_loss"] for _, r in members])
        rel = np.abs(finals - ref["final_loss"]) / max(abs(ref["final_loss"]), 1e-30)
        traj = max((float(np.max(np.abs(run.loss - ref_run.loss)) / max(np.max(np.abs(ref_run.loss)), 1e-30))
                    for run, _ in members if run.loss.shape == ref_run.loss.shape), default=np.nan)
        worst = int(np.argmax(rel))
        if np.all(rel <= LOSS_RTOL):
            lines.append(f"final losses agree: {len(members)} runs within {rel.max():.2e} relative of "
                         f"{ref['final_loss']:.7f} (tolerance {LOSS_RTOL:g}; every step's loss within {traj:.2e})")
        else:
            lines.append(f"WARNING: final losses differ by up to {rel.max():.2e} relative (tolerance {LOSS_RTOL:g}): "
                         f"{members[worst][1]['label']} has {finals[worst]:.7f}, {ref['label']} {ref['final_loss']:.7f}")
    return lines


def comparisons(df):
    lines = []
    for n in sorted(df.loc[df["U"] * df["R"] > 1, "ranks"].unique()):
        at = df[df["ranks"] == n]
        uly = at[(at["U"] == n) & (at["R"] == 1)]
        ring = at[(at["R"] == n) & (at["U"] == 1) & (at["ring_overlap"] == "true")]
        if len(uly) and len(ring):
            for _, rr in ring.iterrows():
                u, r = uly.iloc[0]["step_s"], rr["step_s"]
                lines.append(f"ring vs ulysses step time at {n} ranks: {r:.3f} s vs {u:.3f} s "
                             f"(ratio {r / u:.2f}; {rr['strategy']})")
        # Pairs that differ only in ring_overlap.
        on = at[(at["R"] > 1) & (at["ring_overlap"] == "true")]
        for _, a in on.iterrows():
            off = at[(at["R"] == a["R"]) & (at["U"] == a["U"]) & (at["ring_layout"] == a["ring_layout"])
                     & (at["ring_variant"] == a["ring_variant"]) & (at["ring_overlap"] != "true")]
            if not len(off):
                continue
            b = off.iloc[0]
            w_on, w_off = a["ring_wait_s"], b["ring_wait_s"]
            if not (w_off > 0):
                lines.append(f"hidden ring communication at {n} ranks ({a['strategy']}): no estimate "
                             f"(ring_wait with overlap off is {fmt(w_off)} s)")
                continue
            raw = 1.0 - w_on / w_off
            frac = min(max(raw, 0.0), 1.0)
            lines.append(f"fraction of ring communication hidden behind compute at {n} ranks ({a['strategy']}): "
                         f"{frac:.2f}{'' if frac == raw else f' (clamped from {raw:.2f})'}  (ring_wait {w_on:.4f} s/step with overlap vs {w_off:.4f} s/step without; "
                         f"step {a['step_s']:.3f} vs {b['step_s']:.3f} s)")
    if any("hidden" in s for s in lines):
        lines.append("  estimate: hidden = 1 - ring_wait(overlap on) / ring_wait(overlap off), clamped to [0, 1]; "
                     "with overlap off every transfer is waited on in full, so that run's ring_wait is the whole "
                     "transfer time, and what the overlapped run still waits for is the exposed part (assumes the "
                     "transfers take as long in both runs).")
    return lines


def notes(runs, df):
    out = []
    for run, (_, r) in zip(runs, df.iterrows()):
        cs = mm.comm_stats(run)
        bad = [op for op in cs.index if truth(cs.at[op, "matches"]) is False]
        for op in bad:
            out.append(f"{r['label']}: {op} bytes {cs.at[op, 'bytes']:.0f} B/step (ranks {cs.at[op, 'min_rank']:.0f}.."
                       f"{cs.at[op, 'max_rank']:.0f}) differ from the analytic {cs.at[op, 'model']:.0f} B/step")
        if not run.comm:
            out.append(f"{r['label']}: no /comm group (file older than the sequence-parallel metrics)")
        if r["valid"] != "PASSED":
            out.append(f"{r['label']}: valid = {r['valid']}")
        if r["R"] > 1 and r["ring_overlap"] != "true" and not r["ring_wait_s"] > 0:
            out.append(f"{r['label']}: ring_overlap=false but ring_wait is {fmt(r['ring_wait_s'])} s")
        if r["U"] * r["R"] * r["D"] != r["ranks"]:
            out.append(f"{r['label']}: U x R x D = {r['U'] * r['R'] * r['D']} != {r['ranks']} ranks")
    nomodel = [r["label"] for run, (_, r) in zip(runs, df.iterrows()) if run.memory and not run.model_memory]
    if nomodel:
        out.append(f"no analytic memory model (/memory/model) in {len(nomodel)} of {len(runs)} files: "
                   + ", ".join(nomodel))
    # Oversubscription: only knowable when the runs were made on this very host.
    here, cores = socket.gethostname(), os.cpu_count() or 1
    over = sorted({int(r["ranks"]) for run, (_, r) in zip(runs, df.iterrows())
                   if run.attrs.get("hostname") == here and str(run.attrs.get("numhosts", "1")) == "1"
                   and r["ranks"] > cores})
    if over:
        out.append(f"runs at {', '.join(map(str, over))} ranks oversubscribe this host's {cores} cores: their "
                   "timings (and the ring/ulysses ratio and hidden fraction there) are not meaningful")
    return out, over


def plot(df, runs, path, oversubscribed):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(df)
    x = np.arange(n)
    labels = [s.replace(" np", "\nnp") for s in df["label"]]
    colors = dict(zip(PLOT_PHASES, plt.get_cmap("tab10").colors))
    fig, axes = plt.subplots(3, 1, figsize=(max(11.0, 1.35 * n + 3), 15), constrained_layout=True)
    # Separate the rank counts with light vertical lines.
    bounds = [i - 0.5 for i in range(1, n) if df["ranks"].iloc[i] != df["ranks"].iloc[i - 1]]

    ax = axes[0]
    step = df["step_s"].to_numpy()
    big = np.nanmax(step) >= 1.0
    scale, unit = (1.0, "s") if big else (1e3, "ms")
    ax.bar(x, step * scale, 0.9, facecolor="whitesmoke", edgecolor="black", lw=1.2,
           label="step (slowest rank)", zorder=1)
    w = 0.84 / len(PLOT_PHASES)
    for i, ph in enumerate(PLOT_PHASES):
        v = df[f"{ph}_s"].fillna(0).to_numpy() * scale
        ax.bar(x - 0.42 + w * (i + 0.5), v, w, color=colors[ph], label=ph, zorder=2)
    for xi, s in zip(x, step * scale):
        ax.text(xi, s, f"{s:.3g} {unit}", ha="center", va="bottom", fontsize=8)
    for i, ph in enumerate(("alltoall", "ring_wait", "comm")):  # the small ones: print their values
        j = PLOT_PHASES.index(ph)
        for xi, v in zip(x, df[f"{ph}_s"].fillna(0).to_numpy() * scale):
            if v > 0:
                ax.text(xi - 0.42 + w * (j + 0.5), v, f"{v:.2g}", ha="center", va="bottom", fontsize=6.5,
                        rotation=90)
    ax.set_yscale("log")  # attention is most of the step; the communication phases are 10-100x smaller
    pos = df[[f"{ph}_s" for ph in PLOT_PHASES]].to_numpy().ravel() * scale
    pos = pos[np.isfinite(pos) & (pos > 0)]
    ax.set_ylim(max(pos.min() / 2, np.nanmax(step * scale) * 1e-4) if pos.size else None, np.nanmax(step * scale) * 4)
    ax.set_ylabel(f"{unit} per step (log)")
    ax.set_title("Time per phase (mean per measured step, avg over ranks; grey box: step of the slowest rank)\n"
                 "alltoall and ring_wait are inside attention; attention, mlp inside forward+backward; "
                 "comm = gradient all-reduce", fontsize=10)
    ax.legend(fontsize=8, ncol=4, loc="upper right")

    ax = axes[1]
    bottom = np.zeros(n)
    opc = dict(alltoall=colors["alltoall"], ring=colors["ring_wait"], rsa_allreduce="tab:olive", allreduce=colors["comm"])
    for op in OPS:
        v = df[f"{op}_MiB"].fillna(0).to_numpy()
        ax.bar(x, v, 0.6, bottom=bottom, color=opc[op], label=op)
        bottom += v
    model = sum(df[f"{op}_model_MiB"].fillna(0).to_numpy() for op in OPS)
    ax.scatter(x, model, marker="_", s=2200, color="black", lw=2, zorder=3, label="analytic model (total)")
    match = [all(m is True for m in ms) for ms in zip(*(df[f"{op}_matches_model"] for op in OPS))]
    for xi, top, ok in zip(x, np.maximum(bottom, model), match):
        ax.text(xi, top, f"{top:.3g} MiB\n" + ("= model" if ok else "!= model"), ha="center", va="bottom",
                fontsize=8, color="black" if ok else "red")
    ax.set_ylabel("MiB per step per rank")
    ax.set_title("Communication: bytes sent to other ranks per step and rank (mean over ranks and steps), "
                 "by operation, stacked", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", markerscale=0.25)

    ax = axes[2]
    mc = plt.get_cmap("tab10").colors
    w = 0.84 / len(MEMORY)
    for i, c in enumerate(MEMORY):
        v = df[f"{c}_MiB"].fillna(0).to_numpy()
        ax.bar(x - 0.42 + w * (i + 0.5), v, w, label=c, color="black" if c == "device_total" else mc[i])
    for xi, v in zip(x, df["device_total_MiB"]):
        ax.text(xi + 0.42 - w / 2, v, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("MiB per rank (max over ranks)")
    ax.set_title("Memory high-water per category (device_total: concurrent peak of all device categories)",
                 fontsize=10)
    ax.legend(fontsize=8, ncol=4, loc="upper right")

    for ax in axes:
        if ax.get_yscale() == "linear":
            ax.set_ylim(0, ax.get_ylim()[1] * 1.3)
        ax.set_xticks(x)
        ax.set_xticklabels(labels, fontsize=9)
        ax.set_xlim(-0.6, n - 0.4)
        for b in bounds:
            ax.axvline(b, color="grey", lw=0.8, ls=":")
    title = f"miniLST sequence-parallel scaling\n{mm.provenance(runs)}"
    if oversubscribed:
        title += (f"  --  {', '.join(map(str, oversubscribed))} ranks oversubscribe this host's "
                  f"{os.cpu_count()} cores: those timings are not meaningful")
    fig.suptitle(title, fontsize=11)
    mm.save_figure(fig, path, "--plot", dpi=100)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", metavar="DIR_OR_FILE.h5")
    ap.add_argument("--png", help="write the three-panel figure here")
    ap.add_argument("--csv", help="write the full table (one row per run) here")
    args = ap.parse_args(argv)
    if getattr(args, 'csv', None) and mm.output_problem(args.csv, '--csv'):  # checked before any work
        sys.exit(f"scaling.py: error: {mm.output_problem(args.csv, '--csv')}")
    if getattr(args, 'plot', None) and mm.output_problem(args.plot, '--plot'):  # checked before any work
        sys.exit(f"scaling.py: error: {mm.output_problem(args.plot, '--plot')}")
    if sum(os.path.isdir(p) for p in args.paths) > 1:  # other machines or commits: never averaged together here
        print("scaling.py: several directories: comparing them side by side with analysis/compare.py",
              file=sys.stderr)
        return compare.main(args.paths + (["--plot", args.png] if args.png else [])
                            + (["--csv", args.csv] if args.csv else []))
    try:
        runs = [mm.load(p) for p in expand(args.paths)]
    except (UsageError, mm.MetricsError) as e:
        print(f"scaling.py: error: {e}", file=sys.stderr)
        return 2

    df = pd.DataFrame([row(r) for r in runs])
    order = sorted(range(len(runs)), key=lambda i: (df.at[i, "ranks"], df.at[i, "order"], df.at[i, "U"],
                                                     df.at[i, "label"], df.at[i, "file"]))
    runs = [runs[i] for i in order]
    df = df.iloc[order].reset_index(drop=True)
    dup = df["label"].duplicated(keep=False)  # repeats: named by their job, then numbered
    df.loc[dup, "label"] = mm.unique_labels(list(df.loc[dup, "label"] + " job " + df.loc[dup, "job"]))

    times, comm = tables(df)
    print("== time: s per measured step (step: slowest rank; phases: avg over ranks); tok/s/rank = fom")
    print(times.to_string())
    print()
    print("== communication: MiB sent to other ranks per step and rank ((!): differs from the analytic model);"
          " memory: MiB high-water, max over ranks")
    print(comm.to_string())
    print()
    for line in loss_check(runs, df) + comparisons(df):
        print(line)
    extra, over = notes(runs, df)
    for line in extra:
        print(f"note: {line}")
    if args.csv:
        mm.write_text_output(args.csv, df.drop(columns=["order"]).to_csv(index=False), "--csv")
        print(f"wrote {args.csv}")
    if args.png:
        plot(df, runs, args.png, over)
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except mm.MetricsError as e:  # an output refused (minilst_metrics: its rule), one line
        print(f"scaling.py: error: {e}", file=sys.stderr)
        sys.exit(2)
