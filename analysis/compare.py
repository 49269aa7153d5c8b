#!/usr/bin/env python3
"""Compare miniLST runs and sweeps from different machines or commits side by side.

    /usr/bin/python3 analysis/compare.py [LABEL=]PATH [[LABEL=]PATH ...] [--csv FILE] [--markdown]
                                         [--plot FILE.png] [--scaling auto|strong|weak] [--phases a,b,...]

PATH: a metrics file, a job directory (the metrics files in it) or a sweep directory of scripts/slurm/sweep.sh
(points.tsv and point_<i>/). Metrics files are recognised by their schema attribute, whatever their name. Runs are
grouped into sources: by LABEL where one is given, else by machine (cluster or host, CPU or GPU, threads per rank,
commit), labelled by what tells the sources apart; the first source is the reference. Points match across
sources by deck, attention layout, ranks, seq_len, precision and memory policy.

Per point and source, over the repeats (failed or incomplete runs counted, never averaged in): tokens/s per rank
(the FOM: median, and its spread, half of max - min over the median), tokens/s of all ranks, speed-up and parallel
efficiency against the smallest rank count of the same source and layout (a 1-rank run is every layout's base);
strong scaling (the tokens of a step fixed): speed-up = t(n0)/t(n), efficiency = speed-up x n0/n; weak scaling
(tokens per rank fixed, sweep.sh --scaling weak): efficiency = t(n0)/t(n); t = the median step time of the slowest
rank. Then MFU, device memory, bytes sent per step, tokens per joule (n/a without an energy meter) and the run
rules' verdict (reportable; "?" for files older than the rules), and per phase the seconds per measured step on
the slowest rank. noise? = yes where the difference between two sources may come from the machine rather than
the code (noise_verdict): the spread over repeats of either source is larger than the difference; a run's own
measured steps vary by more than the difference; or a run's placement says it competed for cores (its ranks share
a core, more ranks on a host than the host's cores, or another run of the comparison ran on the same host and cores
at the same time: placement, launchdate). ? where a side has a single run and nothing else judges it.
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import stop_signals  # noqa: E402,F401  (first: a stop signal ends this script with a line and exit 4)

import argparse
import csv
import io
import json
import math
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilst_metrics as mm  # noqa: E402

KEY = ("deck", "layout", "ranks", "seq_len", "precision", "policy")
# Phases not shown by default: the background time of posted collectives, the prefetch's part of
# offload_wait and the copy engine's busy time (the rest: the files' own list, minilst_metrics.phases).
HIDDEN_PHASES = ("grad_reduce_overlap", "param_gather_overlap", "prefetch_wait", "copy_engine_busy")


def default_phases(measured) -> list:
    """The phases the files time, in the program's order, less the hidden ones."""
    for m in measured:
        if m.run is not None:
            return [p for p in mm.phases(m.run) if p not in HIDDEN_PHASES]
    return []


class UsageError(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------------
# Reading: every argument into measured runs, each with its source label (None: derive it from the machine).

@dataclass
class Measured:
    """One run (or one sweep point that left no metrics file) reduced to what the comparison needs."""
    label: str           # the LABEL given with its path, or None
    origin: str          # the argument it came from
    key: tuple           # KEY
    ok: bool             # complete and valid: it enters the statistics
    why: str = ""        # why not ok
    run: mm.Run = None
    family: str = ""
    tokens: float = np.nan                      # tokens of a step, all ranks
    step_s: float = np.nan
    fom: float = np.nan                         # tokens/s per rank
    mfu: float = np.nan
    memory_mib: float = np.nan                  # device_total, max over ranks
    comm_mib: dict = field(default_factory=dict)  # op -> MiB sent per step, mean over ranks
    phases: dict = field(default_factory=dict)    # phase -> s per measured step, slowest rank
    tokens_per_joule: float = np.nan
    energy_source: str = "n/a"
    reportable: str = "?"
    reasons: str = ""
    strategy: str = ""   # a sweep point's strategy (points.tsv)
    source: str = ""     # filled in by assign_sources
    step_spread: mm.Spread = None               # the measured steps' seconds on the slowest rank
    cores: frozenset = frozenset()              # (host, physical core) of every rank; (host, None): unknown cores
    start: float = np.nan                       # launchdate, seconds since the epoch
    end: float = np.nan                         # start + the steps' seconds (a lower bound of the run's end)
    contention: list = field(default_factory=list)  # why its placement says it competed for cores ([] none)


def split_label(arg: str):
    """'LABEL=PATH' -> (LABEL, PATH); a plain path (or one whose '=' is part of an existing name) -> (None, PATH)."""
    label, eq, path = arg.partition("=")
    if eq and label and not os.path.exists(arg):
        return label, path
    return None, arg


def failure(run: mm.Run) -> str:
    """Why a run must stay out of the statistics ('' for none): stopped early, not valid, nothing measured."""
    v = mm.verdict(run.attrs)
    if v == "INCOMPLETE":
        return f"INCOMPLETE ({mm.text(run.attrs, 'stop_reason', 'stopped early')})"
    if v == "INVALID":
        return f"INVALID (reference check {mm.text(run.attrs, 'reference_check', '?')})"
    return "" if run.measured.any() else "no measured step"


def measure(run: mm.Run, label, origin) -> Measured:
    """The comparison's numbers of one run."""
    a = run.attrs
    key = (mm.deck_name(run), mm.layout_name(run), run.ranks, int(float(a.get("seq_len", run.cfg("run", "seq_len", 0)))),
           mm.text(a, "precision", "?"), mm.text(a, "memory_policy", "?"))
    why = failure(run)
    m = Measured(label, origin, key, not why, why=why, run=run, family=mm.layout_family(run),
                 reportable=mm.reportable(a), reasons=mm.text(a, "reportable_reasons"))
    # tokens of a step, all ranks; files without the attribute: S x grad_accum x data-parallel replicas
    m.tokens = float(a.get("tokens_per_step", key[3] * int(a.get("grad_accum", 1)) * mm.parallel_layout(run)["D"]))
    m.step_s = mm.step_time(run)
    m.fom = float(a.get("fom", np.nan))
    m.mfu = float(a.get("mfu", np.nan))
    m.memory_mib = float(run.memory["device_total"].max()) / mm.MIB if "device_total" in run.memory else np.nan
    cs = mm.comm_stats(run)
    m.comm_mib = {op: float(cs.at[op, "bytes"]) / mm.MIB for op in cs.index}
    m.phases = {ph: mm.slowest_rank_time(run, ph) for ph in run.timings}
    e = mm.energy(a)
    if e:
        m.energy_source, m.tokens_per_joule = e[0], e[1]
    m.step_spread = mm.spread(mm.slowest_rank_steps(run, "step"))
    read_placement(m, run)
    return m


# ---------------------------------------------------------------------------------------------------------------
# Placement: where each run's ranks ran and when, to tell runs that competed for cores.

def read_placement(m: Measured, run: mm.Run):
    """The run's cores (placement: per rank its host and physical cores), its time span, and the contention its own
    placement shows: ranks sharing a core (cores_shared), more ranks on a host than its cores (cpu_cores)."""
    a = run.attrs
    try:
        ranks = json.loads(mm.text(a, "placement", "[]") or "[]")
    except ValueError:
        ranks = []
    cores, per_host = set(), defaultdict(int)
    for r in ranks if isinstance(ranks, list) else []:
        if not isinstance(r, dict):
            continue
        host = str(r.get("host", "?"))
        per_host[host] += 1
        listed = [c for c in r.get("cores") or [] if isinstance(c, int)]
        if listed:
            cores.update((host, c) for c in listed)
        else:
            cores.add((host, None))
    m.cores = frozenset(cores)
    try:
        m.start = float(a.get("launchdate", np.nan))
    except (TypeError, ValueError):
        m.start = np.nan
    steps = run.timings.get("step")
    m.end = m.start + (float(steps.max(axis=1).sum()) if steps is not None and steps.size else 0.0)
    if mm.text(a, "cores_shared") == "yes":
        m.contention.append(f"its ranks share a core ({mm.text(a, 'cores_shared_note', '?')})")
    try:
        node_cores = int(float(a.get("cpu_cores", 0)))
    except (TypeError, ValueError):
        node_cores = 0
    crowded = [f"{n} ranks on {h}" for h, n in per_host.items() if node_cores and n > node_cores]
    if crowded:
        m.contention.append(f"{', '.join(crowded)} with {node_cores} cores")


def mark_concurrent(measured: list):
    """Adds to each run's contention every other run that ran on one of its cores (or on its host, where a side's
    cores are unknown) while it ran: runs of two sources, or two points of one sweep, started side by side."""
    runs = [m for m in measured if m.run is not None and m.cores and np.isfinite(m.start)]
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            if os.path.realpath(a.run.path) == os.path.realpath(b.run.path):  # one file given twice
                continue
            if not (a.start < b.end and b.start < a.end):
                continue
            hosts_a, hosts_b = {h for h, _ in a.cores}, {h for h, _ in b.cores}
            common = a.cores & b.cores
            unknown = {h for h, c in a.cores | b.cores if c is None} & hosts_a & hosts_b
            if common or unknown:
                where = sorted({h for h, _ in common} | unknown)
                for x, y in ((a, b), (b, a)):
                    x.contention.append(f"ran beside {y.run.name} on {', '.join(where)} at the same time")


def failed_point(point: dict, label, origin, siblings) -> Measured:
    """A sweep point without a metrics file: failed, matched to a run of the same sweep with the same ranks,
    seq_len and strategy for its key (else a key from points.tsv alone)."""
    same = [s for s in siblings if str(s.key[2]) == point["ranks"] and str(s.key[3]) == point["seq_len"]
            and s.strategy == point["strategy"]]
    deck = os.path.splitext(os.path.basename(point.get("deck") or "?"))[0]
    key = same[0].key if same else (deck, point["strategy"], int(point["ranks"]), int(point["seq_len"]), "?", "?")
    return Measured(label, origin, key, False, why=f"point {point['index']}: no metrics file",
                    family=same[0].family if same else point["strategy"])


def read_sweep(path, label) -> list:
    points = mm.sweep_points(path)
    done = []
    for p in points:
        if p["metrics"]:
            done.append(measure(mm.load(p["metrics"]), label, path))
            done[-1].strategy = p["strategy"]  # to place the failed repeats of the same point
    return done + [failed_point(p, label, path, done) for p in points if not p["metrics"]]


def read_argument(arg: str) -> list:
    """The measured runs of one argument: a metrics file, a sweep directory or a job directory."""
    label, path = split_label(arg)
    if os.path.isdir(path) and mm.is_sweep(path):
        return read_sweep(path, label)
    if os.path.isdir(path):
        files = mm.metrics_files(path)
        if not files:
            raise UsageError(f"{path}: no metrics files (HDF5 with schema {mm.SCHEMA}) and no points.tsv")
        return [measure(mm.load(f), label, path) for f in files]
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file or directory")
    return [measure(mm.load(path), label, path)]


def assign_sources(measured: list) -> list:
    """Set every run's source: its LABEL, else a label for its machine that tells it from the other machines.
    Returns the source labels in the order they first appear."""
    given = {m.label for m in measured if m.label}
    by_origin = {}  # failed sweep points carry no attributes: they take the source of their sweep's runs
    idents = []
    for m in measured:
        if not m.label and m.run is not None:
            ident = tuple(mm.identity(m.run.attrs).values())
            by_origin.setdefault(m.origin, ident)
            if ident not in idents:
                idents.append(ident)
    names = mm.default_labels([dict(zip(("site", "device", "kokkos", "blas", "commit"), i)) for i in idents])
    names = [n + " (auto)" if n in given else n for n in names]
    auto = dict(zip(idents, names))
    for m in measured:
        if m.label:
            m.source = m.label
        else:
            ident = tuple(mm.identity(m.run.attrs).values()) if m.run is not None else by_origin.get(m.origin)
            m.source = auto.get(ident, os.path.basename(os.path.normpath(m.origin)))
    return list(dict.fromkeys(m.source for m in measured))


# ---------------------------------------------------------------------------------------------------------------
# Points: the runs of one source at one KEY, their statistics, scaling and noise.

@dataclass
class Point:
    source: str
    key: tuple
    runs: list            # the ok runs
    failed: list          # the others
    speedup: float = np.nan
    efficiency: float = np.nan
    scaling: str = ""
    base_ranks: int = 0

    def over(self, attr) -> mm.Spread:
        return mm.spread(getattr(m, attr) for m in self.runs)

    @property
    def fom(self) -> mm.Spread:
        return self.over("fom")

    @property
    def total(self) -> mm.Spread:
        return mm.spread(m.fom * self.ranks for m in self.runs)

    @property
    def step(self) -> mm.Spread:
        return self.over("step_s")

    def phase(self, ph) -> mm.Spread:
        return mm.spread(m.phases.get(ph, np.nan) for m in self.runs)

    @property
    def ranks(self) -> int:
        return self.key[2]

    @property
    def family(self) -> str:
        return (self.runs or self.failed)[0].family

    @property
    def tokens(self) -> float:
        return self.runs[0].tokens if self.runs else np.nan

    @property
    def comm_mib(self) -> float:
        return mm.spread(sum(m.comm_mib.values()) for m in self.runs).median

    @property
    def reportable(self) -> str:
        """yes / no / ? over the runs; 'no (1 of 2)' where the repeats disagree."""
        return mm.pooled_reportable([m.reportable for m in self.runs + self.failed if m.run is not None])

    @property
    def energy_source(self) -> str:
        return next((m.energy_source for m in self.runs if m.energy_source != "n/a"), "n/a")


def make_points(measured: list) -> dict:
    """(source, KEY) -> Point."""
    groups = defaultdict(list)
    for m in measured:
        groups[(m.source, m.key)].append(m)
    return {k: Point(k[0], k[1], [m for m in ms if m.ok], [m for m in ms if not m.ok]) for k, ms in groups.items()}


def series_key(p: Point, kind: str):
    """Points of one series do the same total work (strong) or the same work per rank (weak)."""
    return round(p.tokens) if kind == "strong" else round(p.tokens / p.ranks, 6)


def split_series(members: list, kind: str) -> list:
    groups = defaultdict(list)
    for p in members:
        if p.runs:
            groups[series_key(p, kind)].append(p)
    return [sorted(g, key=lambda p: p.ranks) for g in groups.values()]


def choose_scaling(members: list) -> str:
    """auto: the kind under which more points have a partner at another rank count (a tie: strong)."""
    def covered(kind):
        return sum(len(s) for s in split_series(members, kind) if len({p.ranks for p in s}) > 1)
    return "weak" if covered("weak") > covered("strong") else "strong"


def set_scaling(p: Point, base: Point, kind: str):
    t0, t, n0, n = base.step.median, p.step.median, base.ranks, p.ranks
    p.scaling, p.base_ranks = kind, n0
    if kind == "strong":
        p.speedup = t0 / t
        p.efficiency = p.speedup * n0 / n
    else:
        p.efficiency = t0 / t
        p.speedup = p.efficiency * n / n0  # scaled speed-up: the tokens/s of all ranks against the base's


def assign_scaling(points: dict, mode: str) -> list:
    """Speed-up and efficiency of every point against its series' smallest rank count. Returns the series
    (source, layout family, kind, [points by ranks]) for the plot."""
    groups = defaultdict(list)
    for p in points.values():
        deck, _, _, _, precision, policy = p.key
        groups[(p.source, deck, precision, policy)].append(p)
    series = []
    for (source, *_), pts in groups.items():
        families = sorted({p.family for p in pts if p.ranks > 1}) or ["local"]
        for fam in families:
            members = [p for p in pts if p.family == fam or (p.ranks == 1 and p.family == "local")]
            kind = mode if mode != "auto" else choose_scaling(members)
            for s in split_series(members, kind):
                if s[0].ranks == 1 or len({p.ranks for p in s}) > 1:  # else no base: speed-up unknown
                    for p in s:
                        if p.family == fam or not p.scaling:
                            set_scaling(p, s[0], kind)
                series.append((source, fam, kind, s))
    return series


def noise_verdict(ref: Point, oth: Point):
    """Whether the gap between two points' tokens/s per rank may be noise, and why: (True, reason) where
    - a run's placement says it competed for cores (read_placement, mark_concurrent): its time measures the sharing;
    - the spread over repeats (max - min) of either side exceeds the difference of the medians;
    - a run's measured steps vary (max - min over the median) by more than the relative difference of the medians:
      the machine was busy while it ran;
    (False, '') where each side has repeats and none of these holds, (None, '') where a side has a single run and
    nothing flags it (no spread over repeats to judge by)."""
    runs = ref.runs + oth.runs
    for m in runs:
        if m.contention:
            return True, f"placement: {m.run.name}: {m.contention[0]}"
    if mm.noisy(ref.fom, oth.fom):
        return True, "spread over repeats exceeds the difference"
    lo = min(ref.fom.median, oth.fom.median)
    gap = abs(ref.fom.median - oth.fom.median) / lo if lo > 0 else np.inf
    for m in runs:
        s = m.step_spread
        if s is not None and s.n > 1 and s.median > 0 and s.range / s.median > gap:
            return True, (f"{m.run.name}: its measured steps vary by {100 * s.range / s.median:.0f}%, more than the "
                          f"difference ({100 * gap:.0f}%)")
    return (None, "") if ref.fom.n < 2 or oth.fom.n < 2 else (False, "")


def noise_reason(points: dict, sources: list, key: tuple, source: str) -> str:
    """Why noise? says yes at KEY for a source against the reference (the reference: against any other); ''."""
    others = sources[1:] if source == sources[0] else [source]
    for o in others:
        ref, oth = points.get((sources[0], key)), points.get((o, key))
        if ref and oth and ref.runs and oth.runs:
            verdict, reason = noise_verdict(ref, oth)
            if verdict:
                return reason
    return ""


def comparison(points: dict, sources: list, key: tuple, other: str):
    """(ratio of the tokens/s per rank other/reference, noise verdict) at one KEY; (nan, None) where one is absent."""
    ref, oth = points.get((sources[0], key)), points.get((other, key))
    if not ref or not oth or not ref.runs or not oth.runs:
        return np.nan, None
    return oth.fom.median / ref.fom.median, noise_verdict(ref, oth)[0]


def noise_text(verdict) -> str:
    return {True: "yes", False: "no", None: "?"}[verdict]


def pooled_noise(verdicts: list) -> str:
    """yes where any comparison is noisy, ? where one could not be judged, no where none is; - with none."""
    if not verdicts:
        return "-"
    return noise_text(True if any(verdicts) else None if None in verdicts else False)


@dataclass
class Comparison:
    measured: list   # every run (Measured), failed ones included
    sources: list    # the source labels, the reference first
    points: dict     # (source, KEY) -> Point
    series: list     # (source, layout family, scaling kind, [Point by ranks])
    keys: list       # every KEY, sorted


def sort_key(key) -> tuple:
    return tuple(f"{v:08d}" if isinstance(v, int) else str(v) for v in key)


def analyse(paths, scaling="auto") -> Comparison:
    """Read the arguments ([LABEL=]PATH) and compute every point's statistics, scaling and series."""
    measured = [m for a in paths for m in read_argument(a)]
    mark_concurrent(measured)
    sources = assign_sources(measured)
    points = make_points(measured)
    series = assign_scaling(points, scaling)
    return Comparison(measured, sources, points, series, sorted({k for _, k in points}, key=sort_key))


# ---------------------------------------------------------------------------------------------------------------
# Tables: columns are (group, name); a group spans its columns in the text form.

def fmt(v, spec=".4g") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and spec == ".4g" and 1e4 <= abs(v) < 1e9:
        return f"{v:.0f}"
    return format(v, spec) if isinstance(v, (int, float)) else str(v)


def spread_text(s: mm.Spread) -> str:
    return "-" if s.n == 0 else "1 run" if s.n == 1 else f"+-{100 * s.rel_half_range:.1f}%"


def runs_text(p: Point) -> str:
    return f"{len(p.runs)}" + (f" +{len(p.failed)} failed" if p.failed else "")


def render(columns: list, rows: list, markdown: bool, left: int) -> str:
    """Aligned text (a line of group names over their columns) or a Markdown table; the first `left` columns
    left-aligned, the others right-aligned."""
    if markdown:
        head = [f"{g} {n}".strip() for g, n in columns]
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i < left else "---:" for i in
                                                                range(len(head))) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    width = [max([len(n)] + [len(r[i]) for r in rows]) for i, (_, n) in enumerate(columns)]
    spans = []  # (group, first column, last column)
    for i, (g, _) in enumerate(columns):
        if spans and spans[-1][0] == g:
            spans[-1][2] = i
        else:
            spans.append([g, i, i])
    for g, a, b in spans:  # widen the last column of a group whose name is longer than its columns
        need = len(g) - (sum(width[a:b + 1]) + 2 * (b - a))
        if need > 0:
            width[b] += need
    cell = lambda i, s: s.ljust(width[i]) if i < left else s.rjust(width[i])
    top = "  ".join(g.center(sum(width[a:b + 1]) + 2 * (b - a)) for g, a, b in spans)
    lines = [top.rstrip(), "  ".join(cell(i, n) for i, (_, n) in enumerate(columns))]
    lines.append("  ".join("-" * w for w in width))
    return "\n".join(lines + ["  ".join(cell(i, c) for i, c in enumerate(r)).rstrip() for r in rows])


def key_cells(key) -> list:
    return [str(v) for v in key]


def key_text(key) -> str:
    """'tiny ulysses 2r S=37 double full'."""
    deck, layout, ranks, seq_len, precision, policy = key
    return f"{deck} {layout} {ranks}r S={seq_len} {precision} {policy}"


def time_unit(points) -> tuple:
    """(scale, unit) for phase times: ms where every step takes under a second."""
    steps = [p.step.median for p in points.values() if p.runs]
    return (1e3, "ms") if steps and max(steps) < 1.0 else (1.0, "s")


KEY_COLUMNS = [("", "deck"), ("", "layout"), ("", "ranks"), ("", "S"), ("", "precision"), ("", "policy")]


def throughput_table(points, sources, keys, markdown) -> str:
    cols = list(KEY_COLUMNS)
    for s in sources:
        cols += [(s, n) for n in ("tok/s/rank", "spread", "tok/s", "speed-up", "efficiency", "runs")]
    for s in sources[1:]:
        cols += [(f"{s} / ref", "tok/s ratio"), (f"{s} / ref", "noise?")]
    rows = []
    for key in keys:
        row = key_cells(key)
        for s in sources:
            p = points.get((s, key))
            row += ([fmt(p.fom.median, ".1f"), spread_text(p.fom), fmt(p.total.median, ".1f"), fmt(p.speedup, ".2f"),
                     fmt(p.efficiency, ".2f"), runs_text(p)] if p else ["n/a"] * 6)
        for s in sources[1:]:
            ratio, noise = comparison(points, sources, key, s)
            row += [fmt(ratio, ".3f"), noise_text(noise) if not math.isnan(ratio) else "-"]
        rows.append(row)
    return render(cols, rows, markdown, len(KEY_COLUMNS))


def resources_table(points, sources, keys, markdown) -> str:
    cols = list(KEY_COLUMNS)
    for s in sources:
        cols += [(s, n) for n in ("MFU", "device MiB", "comm MiB/step", "tok/J", "reportable")]
    rows = []
    for key in keys:
        row = key_cells(key)
        for s in sources:
            p = points.get((s, key))
            if not p:
                row += ["n/a"] * 5
                continue
            tpj = p.over("tokens_per_joule")
            row += [fmt(p.over("mfu").median, ".3f"), fmt(p.over("memory_mib").median, ".2f"),
                    fmt(p.comm_mib, ".3f"), fmt(tpj.median, ".4g") if tpj.n else "n/a", p.reportable]
        rows.append(row)
    return render(cols, rows, markdown, len(KEY_COLUMNS))


def shown_phases(points, sources, key, wanted) -> list:
    """The phases any source timed above zero at this point, in the order asked for."""
    ps = [points[(s, key)] for s in sources if (s, key) in points]
    return [ph for ph in wanted if any(p.phase(ph).n and p.phase(ph).median > 0 for p in ps)]


def phase_table(points, sources, keys, wanted, markdown) -> str:
    scale, unit = time_unit(points)
    cols = KEY_COLUMNS + [("", "phase")]
    for s in sources:
        cols += [(s, f"{unit}/step"), (s, "spread")]
    for s in sources[1:]:
        cols += [(f"{s} / ref", "time ratio")]
    rows = []
    for key in keys:
        for ph in shown_phases(points, sources, key, wanted):
            row = key_cells(key) + [ph]
            med = {}
            for s in sources:
                p = points.get((s, key))
                sp = p.phase(ph) if p else mm.Spread([])
                med[s] = sp.median
                row += [fmt(sp.median * scale, ".4g"), spread_text(sp)] if p else ["n/a", ""]
            row += [fmt(med[s] / med[sources[0]], ".3f") if med[sources[0]] else "-" for s in sources[1:]]
            rows.append(row)
    return render(cols, rows, markdown, len(KEY_COLUMNS) + 1)


# ---------------------------------------------------------------------------------------------------------------
# Summary lines.

def describe_sources(measured, sources, markdown=False) -> list:
    """One line per source: machines, dates, commits, jobs, threads, runs, where from."""
    lines = []
    for i, s in enumerate(sources):
        ms = [m for m in measured if m.source == s]
        runs = [m.run for m in ms if m.run is not None]
        ident = mm.identity(runs[0].attrs) if runs else {}
        failed = sum(not m.ok for m in ms)
        lines.append(f"{'- ' if markdown else '  '}{s}{' (reference)' if i == 0 else ''}: "
                     + (mm.provenance(runs) if runs else "no metrics file")
                     + (f" | threads per rank: {ident['kokkos']}, {ident['blas']}" if ident else "")
                     + f"; {len(ms)} run(s), {failed} failed; from {', '.join(sorted({m.origin for m in ms}))}")
    return lines


def summary_lines(points, sources, keys, measured) -> list:
    out = []
    for s in sources[1:]:
        cmp = [comparison(points, sources, k, s) for k in keys]
        ratios = [r for r, _ in cmp if not math.isnan(r)]
        if not ratios:
            out.append(f"{s} / {sources[0]}: no point in common (deck, layout, ranks, S, precision, policy)")
            continue
        sp = mm.spread(ratios)
        out.append(f"{s} / {sources[0]}: tokens/s per rank at {len(ratios)} common point(s): median ratio "
                   f"{sp.median:.3f} ({sp.lo:.3f}..{sp.hi:.3f})")
        noise = [n for r, n in cmp if not math.isnan(r)]
        if any(noise):
            why = defaultdict(int)  # the first reason of each noisy point, counted
            for k in keys:
                ref, oth = points.get((sources[0], k)), points.get((s, k))
                if ref and oth and ref.runs and oth.runs:
                    verdict, reason = noise_verdict(ref, oth)
                    if verdict:
                        why[reason.split(":")[0] if reason.startswith("placement") else
                            "spread over repeats" if reason.startswith("spread") else "step-to-step spread"] += 1
            out.append(f"WARNING: noise: at {sum(n is True for n in noise)} of {len(noise)} common point(s) the "
                       f"difference between {s} and {sources[0]} is within what the machine alone can make "
                       f"(noise? = yes; {', '.join(f'{w}: {n}' for w, n in sorted(why.items()))}): there it is not "
                       "significant; more repeats (sweep.sh --repeats), exclusive nodes or a quieter machine")
            for m in sorted({m.run.name: m for m in measured if m.contention and m.run is not None}.values(),
                            key=lambda m: m.run.name)[:5]:
                out.append(f"  placement: {m.run.name}: {'; '.join(m.contention)}")
        single = sum(n is None for n in noise)
        if single:
            out.append(f"note: {single} common point(s) of {s} and {sources[0]} have a single run on a side "
                       "(single run: no spread; noise? = ?)")
    origins = {m.origin for m in measured}
    if len(sources) == 1 and len(origins) > 1:
        out.append(f"note: the {len(origins)} paths come from one machine and commit: their runs are pooled as "
                   "repeats; label them (A=PATH B=PATH) to put them side by side")
    only = [k for k in keys if sum((s, k) in points for s in sources) == 1]
    if len(sources) > 1 and only:
        out.append(f"note: {len(only)} point(s) only in one source: " + "; ".join(key_text(k) for k in only[:6])
                   + (" ..." if len(only) > 6 else ""))
    for k in keys:  # the same deck name may hide different models: say so rather than compare them
        params = {s: points[(s, k)].runs[0].run.attrs.get("parameters") for s in sources
                  if (s, k) in points and points[(s, k)].runs}
        if len({str(v) for v in params.values()}) > 1:
            out.append(f"WARNING: {key_text(k)}: the sources ran different models (parameters: "
                       + ", ".join(f"{s} {v}" for s, v in params.items()) + ")")
    for m in measured:
        if not m.ok:
            what = mm.run_label(m.run) if m.run is not None else key_text(m.key)
            out.append(f"failed ({m.source}): {what}: {m.why} ({m.origin})")
    not_rep = [m for m in measured if m.ok and m.reportable == "no"]
    if not_rep:
        reasons = sorted({m.reasons for m in not_rep if m.reasons})
        out.append(f"note: {len(not_rep)} run(s) not reportable under RUN_RULES.md" +
                   (f": {'; '.join(reasons[:3])}" if reasons else ""))
    return out


# ---------------------------------------------------------------------------------------------------------------
# CSV: one row per source and point.

def csv_rows(points, sources, keys, wanted) -> list:
    rows = []
    for key in keys:
        for s in sources:
            p = points.get((s, key))
            if not p:
                continue
            ratio, own = comparison(points, sources, key, s) if s != sources[0] else (1.0, None)
            others = [c for c in (comparison(points, sources, key, o) for o in sources[1:]) if not math.isnan(c[0])]
            verdicts = [own] if s != sources[0] else [n for _, n in others]
            runs = [m.run for m in p.runs + p.failed if m.run is not None]
            row = dict(zip(KEY, key))
            row.update(source=s, reference=sources[0], runs=len(p.runs), failed=len(p.failed),
                       tokens_per_s_per_rank_median=p.fom.median, tokens_per_s_per_rank_min=p.fom.lo,
                       tokens_per_s_per_rank_max=p.fom.hi, tokens_per_s_per_rank_spread=p.fom.rel_half_range,
                       tokens_per_s_median=p.total.median, step_s_median=p.step.median, step_s_min=p.step.lo,
                       step_s_max=p.step.hi, scaling=p.scaling, base_ranks=p.base_ranks, speedup=p.speedup,
                       efficiency=p.efficiency, ratio_to_reference=ratio,
                       noise=pooled_noise(verdicts) if s == sources[0] or not math.isnan(ratio) else "-",
                       noise_reason=noise_reason(points, sources, key, s),
                       mfu_median=p.over("mfu").median, device_total_MiB=p.over("memory_mib").median,
                       comm_MiB_per_step_per_rank=p.comm_mib, energy_source=p.energy_source,
                       tokens_per_joule=p.over("tokens_per_joule").median, reportable=p.reportable,
                       reportable_reasons="; ".join(sorted({m.reasons for m in p.runs if m.reasons})))
            row.update({f"{ph}_s": p.phase(ph).median for ph in wanted})
            row.update(provenance=mm.provenance(runs) if runs else "", layout_family=p.family)
            rows.append(row)
    return rows


def write_csv(path, rows):
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=list(rows[0]) if rows else list(KEY))
    w.writeheader()
    w.writerows(rows)
    mm.write_text_output(path, text.getvalue(), "--csv")


# ---------------------------------------------------------------------------------------------------------------
# Plot: tokens/s and efficiency against ranks per source and layout, the phases at the largest common point.

def largest_common_key(points, sources, keys):
    """The point most sources have, the most ranks, then the longest sequence."""
    have = lambda k: sum((s, k) in points and bool(points[(s, k)].runs) for s in sources)
    return max(keys, key=lambda k: (have(k), k[2], k[3]), default=None)


def series_name(source, fam, kind, pts, multi) -> str:
    name = f"{source}: {fam}" if fam != "local" or pts[-1].ranks == 1 else f"{source}: local (data parallel)"
    extra = [pts[0].key[0]] if multi["deck"] else []
    if multi["tokens"]:
        extra.append(f"{kind} {pts[0].tokens:.0f} tok" if kind == "strong" else f"weak {pts[0].tokens / pts[0].ranks:.0f} tok/rank")
    return name + (f" ({', '.join(extra)})" if extra else "")


def plot(path, c: Comparison, wanted=None):
    """The three panels of the comparison into a PNG, titled with every source's machines, dates, commits, jobs
    (wanted: the phases shown; default: the files' own, less the hidden ones)."""
    wanted = wanted if wanted is not None else default_phases(c.measured)
    points, sources, keys, series = c.points, c.sources, c.keys, c.series
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(19, 6.4), constrained_layout=True)
    fams = sorted({f for _, f, _, _ in series})
    palette = plt.get_cmap("tab10").colors
    colors = dict(zip(sources, palette))  # one colour per source; with one source, per layout
    line_color = (lambda src, fam: colors[src]) if len(sources) > 1 else \
        (lambda src, fam: palette[fams.index(fam) % len(palette)])
    marks = dict(zip(fams, "osD^v<>px*"))
    styles = dict(zip(fams, ["-", "--", ":", "-."] * 3))
    multi = dict(deck=len({k[0] for k in keys}) > 1, tokens=len({(s, f) for s, f, _, _ in series}) < len(series))
    ranks = sorted({p.ranks for *_, s in series for p in s})
    for source, fam, kind, pts in series:
        dodge = 2 ** (0.02 * (sources.index(source) - (len(sources) - 1) / 2))  # equal sources stay visible
        x = [p.ranks * dodge for p in pts]
        tot = [p.total for p in pts]
        kw = dict(color=line_color(source, fam), marker=marks[fam], ls=styles[fam], label=series_name(source, fam, kind, pts, multi))
        axes[0].errorbar(x, [t.median for t in tot], yerr=[[t.median - t.lo for t in tot], [t.hi - t.median for t in tot]],
                         capsize=4, **kw)
        axes[1].plot(x, [p.efficiency for p in pts], **kw)
    for ax, ylab, title in ((axes[0], "tokens/s, all ranks (median; bars: min..max over repeats)",
                             "Throughput against ranks"),
                            (axes[1], "parallel efficiency", "Parallel efficiency against the smallest rank count\n"
                             "(strong: speed-up x n0/n; weak: t(n0)/t(n))")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ranks, [str(r) for r in ranks])
        ax.set_xlabel("ranks")
        ax.set_ylabel(ylab)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    axes[1].axhline(1.0, color="grey", lw=0.8, ls=":")
    axes[1].set_ylim(0, max(1.2, axes[1].get_ylim()[1]))
    phase_panel(axes[2], points, sources, keys, wanted, colors)
    fig.suptitle(title_text(c.measured, sources), fontsize=9)
    mm.save_figure(fig, path, "--plot", dpi=100)
    plt.close(fig)


def phase_panel(ax, points, sources, keys, wanted, colors):
    key = largest_common_key(points, sources, keys)
    scale, unit = time_unit(points)
    phases = shown_phases(points, sources, key, wanted) if key else []
    x = np.arange(len(phases))
    w = 0.8 / max(len(sources), 1)
    for i, s in enumerate(sources):
        p = points.get((s, key))
        if not p or not p.runs:
            continue
        sp = [p.phase(ph) for ph in phases]
        ax.bar(x - 0.4 + w * (i + 0.5), [v.median * scale for v in sp], w, color=colors[s], label=s,
               yerr=[[(v.median - v.lo) * scale for v in sp], [(v.hi - v.median) * scale for v in sp]], capsize=3)
    ax.set_xticks(x, phases, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(f"{unit} per measured step, slowest rank (median; bars: min..max)")
    ax.set_title("Per phase at " + (key_text(key) if key else "(no point)") +
                 "\n(nested phases overlap their parents)", fontsize=10)
    ax.legend(fontsize=8)


def title_text(measured, sources) -> str:
    """miniLST comparison: A vs B, then one line per source: machine, dates, commits, jobs."""
    if len(sources) == 1:
        return f"miniLST: {mm.provenance([m.run for m in measured if m.run is not None])}"
    lines = ["miniLST comparison: " + " vs ".join(sources)]
    for s in sources:
        runs = [m.run for m in measured if m.source == s and m.run is not None]
        lines.append(f"{s}: {mm.provenance(runs) if runs else 'no metrics file'}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", metavar="[LABEL=]PATH", help="metrics file, job directory or sweep directory")
    ap.add_argument("--csv", help="write one row per source and point here")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    ap.add_argument("--plot", metavar="FILE.png", help="tokens/s and efficiency against ranks, the phases")
    ap.add_argument("--scaling", choices=("auto", "strong", "weak"), default="auto",
                    help="strong: the tokens of a step fixed; weak: tokens per rank fixed; auto: per layout, the one "
                         "that pairs more points")
    ap.add_argument("--phases", default="", help="the phases to show (comma-separated; default: every phase the files "
                                                  "time but " + ", ".join(HIDDEN_PHASES) + ")")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if getattr(args, 'csv', None) and mm.output_problem(args.csv, '--csv'):  # checked before any work
        sys.exit(f"compare.py: error: {mm.output_problem(args.csv, '--csv')}")
    if getattr(args, 'plot', None) and mm.output_problem(args.plot, '--plot'):  # checked before any work
        sys.exit(f"compare.py: error: {mm.output_problem(args.plot, '--plot')}")
    try:
        c = analyse(args.paths, args.scaling)
    except (UsageError, mm.MetricsError, OSError) as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return 2
    measured, sources, points, keys = c.measured, c.sources, c.points, c.keys
    wanted = [p for p in args.phases.split(",") if p] or default_phases(measured)
    print("sources (tokens/s per rank: median over repeats; spread: +-half of min..max; "
          "efficiency against the smallest rank count)")
    print("\n".join(describe_sources(measured, sources, args.markdown)))
    for title, table in (("throughput and scaling", throughput_table(points, sources, keys, args.markdown)),
                         ("resources and run rules (device MiB: max over ranks; comm: MiB sent per step, mean over "
                          "ranks; tok/J: n/a without an energy meter)",
                          resources_table(points, sources, keys, args.markdown)),
                         (f"phases: {time_unit(points)[1]} per measured step on the slowest rank (median over "
                          "repeats)",
                          phase_table(points, sources, keys, wanted, args.markdown))):
        print(f"\n{'###' if args.markdown else '=='} {title}\n{table}")
    print()
    for line in summary_lines(points, sources, keys, measured):
        print(line)
    if args.csv:
        write_csv(args.csv, csv_rows(points, sources, keys, wanted))
        print(f"wrote {args.csv}")
    if args.plot:
        plot(args.plot, c, wanted)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except mm.MetricsError as e:  # an output refused (minilst_metrics: its rule), one line
        print(f"compare.py: error: {e}", file=sys.stderr)
        sys.exit(2)
