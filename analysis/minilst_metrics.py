"""Read miniLST metrics files (HDF5, schema "minilst-metrics") into numpy/pandas.

    runs = [load(p) for p in paths]
    timings_frame(runs)   # tidy: file, phase, step, rank, seconds, measured
    summary_frame(runs)   # one row per file
    comm_stats(run)       # per communication op: bytes per step per rank, measured vs analytic
    parallel_layout(run)  # attention strategy and the U x R x D decomposition
    metrics_files(dir)    # the metrics files in a directory, found by their schema attribute
    sweep_points(dir)     # a sweep made by scripts/slurm/sweep.sh: each point with its metrics file
    run_label(run)        # what a run is: deck, layout, ranks, job
    provenance(runs)      # machines, dates, commits, jobs: the title of every plot
    spread(values)        # median and min..max over repeats
Unknown attributes, phases and memory categories are kept as they come.
"""
from __future__ import annotations

import csv
import glob
import os
import re
import statistics
from dataclasses import dataclass, field

import h5py
import numpy as np
import pandas as pd
import yaml

SCHEMA = "minilst-metrics"
MIB = 1024.0 ** 2
# Phases that run inside others: never add them to their parents.
NESTED = {"attention": "forward+backward", "mlp": "forward+backward", "lm_head": "forward",
          "recompute": "backward", "grad_reduce": "forward+backward+comm", "param_gather": "forward+backward+comm",
          "grad_reduce_overlap": "(background)", "param_gather_overlap": "(background)"}
TOP_LEVEL = ("forward", "backward", "comm", "optimizer")  # disjoint parts of "step"
DEVICE_MEMORY = ("weights", "gradients", "optimizer", "activations", "workspace", "comm")


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads 1e-5 / 3e-4 (no dot) as floats, as the C++ deck reader does."""


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(
    r"^[-+]?(?:[0-9][0-9_]*)?(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789."))


class MetricsError(Exception):
    """A file that is missing or is not a miniLST metrics file."""


def _decode(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray):
        return _decode(v.item()) if v.size == 1 else [_decode(x) for x in v.tolist()]
    return v.item() if isinstance(v, np.generic) else v


def _int(v):
    return int(v) if isinstance(v, (int, float)) and float(v).is_integer() else v


def _datasets(group) -> dict:
    return {k: np.asarray(o[()]) for k, o in group.items() if isinstance(o, h5py.Dataset)}


@dataclass
class Run:
    path: str
    attrs: dict
    config: dict
    loss: np.ndarray
    timings: dict                                     # phase -> [steps, ranks] seconds
    memory: dict                                      # category -> [ranks] bytes
    model_memory: dict = field(default_factory=dict)  # analytic prediction, if written
    throughput: dict = field(default_factory=dict)    # name -> [steps]
    warmup: int = 0
    timing_attrs: dict = field(default_factory=dict)  # phase -> {"Avg time/rank": ..., ...}
    comm: dict = field(default_factory=dict)          # op -> {"bytes": [steps, ranks], "model_bytes": [ranks]}

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def steps(self) -> int:
        return next(iter(self.timings.values())).shape[0] if self.timings else len(self.loss)

    @property
    def ranks(self) -> int:
        if self.timings:
            return next(iter(self.timings.values())).shape[1]
        return len(next(iter(self.memory.values()), [])) or int(float(self.attrs.get("jobsize", 1)))

    @property
    def measured(self) -> np.ndarray:
        """Boolean mask over steps: True past the warm-up."""
        return np.arange(self.steps) >= self.warmup

    def cfg(self, section: str, key: str, default=None):
        return (self.config.get(section) or {}).get(key, default)


def load(path: str) -> Run:
    """Read one metrics file; raises MetricsError if missing or of another schema."""
    if not os.path.isfile(path):
        raise MetricsError(f"{path}: no such file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise MetricsError(f"{path}: not an HDF5 file ({e})") from None
    with f:
        attrs = {k: _decode(v) for k, v in f.attrs.items()}
        if attrs.get("schema") != SCHEMA:
            raise MetricsError(f"{path}: schema attribute is {attrs.get('schema')!r}, expected {SCHEMA!r}")
        get = lambda name: f[name] if isinstance(f.get(name), h5py.Group) else {}
        mem = get("memory")
        model = _datasets(mem["model"]) if "model" in mem and isinstance(mem["model"], h5py.Group) else {}
        timings = {k: v.reshape(v.shape[0], -1) for k, v in _datasets(get("timings")).items()}
        loss = np.asarray(f["loss"][()]) if "loss" in f else np.zeros(0)
        run = Run(path, attrs, {}, loss, timings, _datasets(mem), model, _datasets(get("throughput")))
        run.timing_attrs = {k: {a: _decode(v) for a, v in get("timings")[k].attrs.items()} for k in timings}
        comm = get("comm")
        run.comm = {op: _datasets(g) for op, g in comm.items() if isinstance(g, h5py.Group)} if comm else {}
    try:
        run.config = yaml.load(attrs.get("config") or "", Loader=_Loader) or {}
    except yaml.YAMLError:
        run.config = {}
    w = attrs.get("warmup_steps", run.cfg("run", "warmup_steps", 0))
    run.warmup = int(min(max(int(w or 0), 0), run.steps))
    return run


def phase_stats(run: Run) -> pd.DataFrame:
    """Per phase, mean seconds per measured step of each rank, then avg/min/max over ranks."""
    m = run.measured
    rows = {}
    for ph, t in run.timings.items():
        per_rank = t[m].mean(axis=0) if m.any() else np.full(t.shape[1], np.nan)
        rows[ph] = dict(avg=per_rank.mean(), min=per_rank.min(), max=per_rank.max(),
                        file_avg=run.timing_attrs.get(ph, {}).get("Avg time/rank", np.nan))
    df = pd.DataFrame.from_dict(rows, orient="index", columns=["avg", "min", "max", "file_avg"])
    step = df["avg"].get("step", np.nan)
    df["pct_step"] = 100.0 * df["avg"] / step if step else np.nan
    return df


def step_time(run: Run) -> float:
    """Mean over measured steps of the slowest rank's step time (what throughput uses)."""
    t = run.timings.get("step")
    return float(t[run.measured].max(axis=1).mean()) if t is not None and run.measured.any() else np.nan


def comm_stats(run: Run) -> pd.DataFrame:
    """Per communication op (alltoall, ring, allreduce, ...): bytes sent to other ranks per step and rank.

    bytes = mean over steps and ranks of /comm/<op>/bytes; model = mean over ranks of model_bytes;
    matches = every step of every rank equals its rank's analytic bytes (NaN when no model).
    Empty frame for files written before the /comm group existed."""
    rows = {}
    for op, d in run.comm.items():
        b = np.asarray(d.get("bytes", np.zeros((0, 0))), dtype=float)
        b = b.reshape(b.shape[0], -1) if b.ndim else b.reshape(1, 1)
        m = np.asarray(d["model_bytes"], dtype=float).ravel() if "model_bytes" in d else None
        match = bool(b.size and m is not None and b.shape[1] == m.size and np.array_equal(b, np.broadcast_to(m, b.shape)))
        rows[op] = dict(bytes=b.mean() if b.size else np.nan, min_rank=b.mean(axis=0).min() if b.size else np.nan,
                        max_rank=b.mean(axis=0).max() if b.size else np.nan,
                        model=m.mean() if m is not None and m.size else np.nan,
                        matches=match if m is not None else np.nan)
    return pd.DataFrame.from_dict(rows, orient="index", columns=["bytes", "min_rank", "max_rank", "model", "matches"])


def parallel_layout(run: Run) -> dict:
    """attention strategy and degrees: U (ulysses), R (ring), D (data parallel), plus ring settings.
    Falls back to the deck's parallel section, and to U = R = 1 for files without them."""
    a = run.attrs
    par = run.config.get("parallel") or {}
    U = int(float(a.get("ulysses", par.get("ulysses", 1)) or 1))
    R = int(float(a.get("ring", par.get("ring", 1)) or 1))
    D = a.get("data_parallel")
    D = int(float(D)) if D is not None else max(run.ranks // max(U * R, 1), 1)
    as_str = lambda v: str(v).lower() if isinstance(v, bool) else str(v)
    return dict(attention=str(a.get("attention", "local" if U * R == 1 else "?")), U=U, R=R, D=D,
                sequence_parallel=int(float(a.get("sequence_parallel", U * R))),
                ring_layout=as_str(a.get("ring_layout", par.get("ring_layout", "zigzag"))),
                ring_variant=as_str(a.get("ring_variant", par.get("ring_variant", "flash"))),
                ring_overlap=as_str(a.get("ring_overlap", par.get("ring_overlap", "true"))))


def timings_frame(runs) -> pd.DataFrame:
    """Tidy frame: one row per file, phase, step and rank."""
    parts = []
    for r in runs:
        for ph, t in r.timings.items():
            steps, ranks = np.indices(t.shape)
            parts.append(pd.DataFrame(dict(file=r.path, phase=ph, step=steps.ravel(), rank=ranks.ravel(),
                                           seconds=t.ravel(), measured=steps.ravel() >= r.warmup)))
    cols = ["file", "phase", "step", "rank", "seconds", "measured"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def summary_frame(runs) -> pd.DataFrame:
    """One row per file, named by what the run is (run_label); <phase>_s = mean s/step averaged over ranks,
    step_s_mean = slowest rank; reportable = the run rules' verdict ("?" for files before the rules)."""
    rows = []
    for r, label in zip(runs, unique_labels([run_label(r) for r in runs])):
        a, mem = r.attrs, lambda k: float(r.memory[k].max()) / MIB if k in r.memory else np.nan
        row = dict(run=label, file=r.path, host=text(a, "hostname", "?"), layout=layout_name(r), ranks=r.ranks,
                   job=run_job(a), seq_len=_int(a.get("seq_len", r.cfg("run", "seq_len"))),
                   layers=r.cfg("model", "layers"), hidden=r.cfg("model", "hidden"),
                   policy=a.get("memory_policy", r.cfg("memory", "policy")),
                   precision=a.get("precision", r.cfg("run", "precision")), fom=a.get("fom", np.nan),
                   step_s_mean=step_time(r))
        row.update({f"{ph}_s": v for ph, v in phase_stats(r)["avg"].items()})
        row.update(device_total_MiB=mem("device_total"), activations_MiB=mem("activations"),
                   workspace_MiB=mem("workspace"), final_loss=r.loss[-1] if len(r.loss) else np.nan,
                   valid=a.get("valid"), reportable=reportable(a))
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------------------
# Finding metrics files. A run names its file as the user or the program chose (metrics.h5 in older job and sweep
# directories, <deck>_<layout>_<N>r_<UTC>_<job>_<pid>.h5 now): recognise it by its schema attribute, not its name.

def is_metrics_file(path: str) -> bool:
    """True for an HDF5 file whose root attribute schema is SCHEMA; False for anything else or an unreadable file."""
    try:
        with h5py.File(path, "r") as f:
            return _decode(f.attrs.get("schema")) == SCHEMA
    except OSError:
        return False


def metrics_files(directory: str) -> list:
    """The metrics files directly inside a directory, sorted by name."""
    return sorted(p for p in glob.glob(os.path.join(glob.escape(directory), "*.h5")) if is_metrics_file(p))


def is_sweep(directory: str) -> bool:
    """A sweep directory of scripts/slurm/sweep.sh: points.tsv and point_<i>/."""
    return os.path.isfile(os.path.join(directory, "points.tsv"))


def sweep_points(directory: str) -> list:
    """The rows of a sweep's points.tsv (index, ranks, seq_len, strategy, repeat, ...), each with "metrics": the
    metrics file in point_<index>/, or None where the point left none (it failed or has not run yet)."""
    with open(os.path.join(directory, "points.tsv")) as fh:
        points = list(csv.DictReader(fh, delimiter="\t"))
    for p in points:
        found = metrics_files(os.path.join(directory, f"point_{p['index']}"))
        p["metrics"] = max(found, key=os.path.getmtime) if found else None  # one per point; a rerun: the newest
    return points


# ----------------------------------------------------------------------------------------------------------------
# What a run is and where it ran: names for tables and plots (never the file name alone).

def text(attrs: dict, key: str, default: str = "") -> str:
    v = attrs.get(key)
    return default if v is None or v == "" else str(v)


def job_id(attrs: dict) -> str:
    """The Slurm job of a run (the array job for an array task), or "local" outside Slurm."""
    return text(attrs, "SLURM_ARRAY_JOB_ID") or text(attrs, "SLURM_JOB_ID") or "local"


def run_job(attrs: dict) -> str:
    """The job naming one run: <array job>_<task> for an array task, else job_id."""
    task = text(attrs, "SLURM_ARRAY_TASK_ID")
    return f"{attrs['SLURM_ARRAY_JOB_ID']}_{task}" if text(attrs, "SLURM_ARRAY_JOB_ID") and task else job_id(attrs)


def deck_name(run: Run) -> str:
    """The deck's file name without .yaml: the attribute deck, else the first YAML file on the command line."""
    words = str(run.attrs.get("cmdline", "")).split()
    path = text(run.attrs, "deck") or next((w for w in words if w.endswith((".yaml", ".yml"))), "")
    return re.sub(r"\.ya?ml$", "", os.path.basename(path)) or "?"


def layout_family(run: Run) -> str:
    """The attention layout without its degrees: local (data parallel past one rank), ulysses,
    ring(<ring_layout>[, <variant>]) or hybrid(...), " no-overlap" where ring transfers were not overlapped,
    "+dp" where sequence-parallel groups are also replicated."""
    p = parallel_layout(run)
    ring = p["ring_layout"] + ("" if p["ring_variant"] == "flash" else f", {p['ring_variant']}")
    if p["U"] > 1 and p["R"] > 1:
        name = f"hybrid({ring})"
    elif p["R"] > 1:
        name = f"ring({ring})"
    elif p["U"] > 1:
        name = "ulysses"
    else:
        return "local"
    if p["R"] > 1 and p["ring_overlap"] != "true":
        name += " no-overlap"
    return name + ("+dp" if p["D"] > 1 else "")


def layout_name(run: Run) -> str:
    """layout_family with the degrees the rank count does not fix: U x R of a hybrid, D of replicated groups."""
    p, name = parallel_layout(run), layout_family(run)
    if p["U"] > 1 and p["R"] > 1:
        name += f" {p['U']}x{p['R']}"
    return name + (f" dp{p['D']}" if p["D"] > 1 and p["U"] * p["R"] > 1 else "")


def run_label(run: Run) -> str:
    """What a run is, for tables and plots: 'tiny ulysses 2r S=37 job 1234_5'."""
    return (f"{deck_name(run)} {layout_name(run)} {run.ranks}r S={text(run.attrs, 'seq_len', '?')} "
            f"job {run_job(run.attrs)}")


def unique_labels(labels: list) -> list:
    """The labels with ' #2', ' #3', ... appended to the repeats of an equal label (in order)."""
    seen, out = {}, []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if labels.count(lab) == 1 else f"{lab} #{seen[lab]}")
    return out


def short_cpu(model: str) -> str:
    """'Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.0GHz' -> 'Intel Xeon Platinum 8480+'."""
    s = re.sub(r"\((R|TM|r|tm)\)", "", model)
    s = re.sub(r"@.*$|\b(CPU|Processor|\d+-Core)\b", "", s)
    return " ".join(s.split()) or "?"


def device(attrs: dict) -> str:
    """What the run computed on: the GPU where it had one, else the CPU model (shortened)."""
    return text(attrs, "gpu") or short_cpu(text(attrs, "cpu_model", "?"))


def site(attrs: dict) -> str:
    """The machine's name: the Slurm cluster's, else the host's (first label), so that a sweep spread over nodes
    of one cluster is one machine."""
    name = text(attrs, "SLURM_CLUSTER_NAME") or text(attrs, "clustername") or text(attrs, "hostname", "?")
    return name.split(".")[0]


def commit(attrs: dict) -> str:
    """The source commit, 7 hex digits, '+dirty' for a build from modified sources."""
    c = text(attrs, "git_commit", "?")[:7]
    return c + ("+dirty" if text(attrs, "git_dirty").lower() == "true" else "")


def date(attrs: dict) -> str:
    """The launch date, YYYY-MM-DD (launchdate is ISO 8601 UTC)."""
    return text(attrs, "launchdate", "?")[:10]


def identity(attrs: dict) -> dict:
    """What makes two runs come from different sources: machine, device, threads per rank, commit."""
    return dict(site=site(attrs), device=device(attrs), kokkos=f"kokkos {text(attrs, 'kokkos_threads', '?')}",
                blas=f"blas {text(attrs, 'blas_threads', '?')}", commit=commit(attrs))


def default_labels(identities: list) -> list:
    """Short labels that tell sources apart: the machine's name, then the device, thread counts and commit
    where they differ between the sources (a single source: name and device); ' #n' where still equal."""
    fields = [k for k in ("device", "kokkos", "blas", "commit") if len({i[k] for i in identities}) > 1]
    if len(identities) == 1:
        fields = ["device"]
    part = lambda i, k: f"({i[k]})" if k == "device" else i[k]
    return unique_labels([" ".join([i["site"]] + [part(i, k) for k in fields]) for i in identities])


def _listed(values, most: int = 4) -> str:
    values = sorted(set(values))
    return ", ".join(values[:most]) + (f" +{len(values) - most} more" if len(values) > most else "")


def provenance(runs) -> str:
    """One line for a plot's title or a table's header: the machines, dates, commits and jobs of the runs."""
    attrs = [r.attrs for r in runs]
    dates = sorted({date(a) for a in attrs})
    return (f"{_listed(f'{site(a)} ({device(a)})' for a in attrs)} | "
            f"{dates[0] if len(dates) == 1 else f'{dates[0]}..{dates[-1]}'} | "
            f"commit {_listed(commit(a) for a in attrs)} | job {_listed(job_id(a) for a in attrs)}")


def reportable(attrs: dict) -> str:
    """The run rules' verdict (RUN_RULES.md): "yes", "no", or "?" for files written before the rules."""
    return text(attrs, "reportable", "?")


def pooled_reportable(verdicts: list) -> str:
    """The verdict of repeated runs: yes where all are, no where all are not, 'no (k of n)' where they disagree,
    ? where any is unknown (and none is no)."""
    no = sum(v == "no" for v in verdicts)
    if no:
        return "no" if no == len(verdicts) else f"no ({no} of {len(verdicts)})"
    return "yes" if verdicts and all(v == "yes" for v in verdicts) else "?"


def energy(attrs: dict):
    """(energy_source, tokens_per_joule, energy_joules) of a run with a meter; None where there was none."""
    src = text(attrs, "energy_source")
    if not src or src.startswith("unavailable") or "tokens_per_joule" not in attrs:
        return None
    return src, float(attrs["tokens_per_joule"]), float(attrs.get("energy_joules", np.nan))


# ----------------------------------------------------------------------------------------------------------------
# Times and spread.

def slowest_rank_steps(run: Run, phase: str) -> np.ndarray:
    """Each measured step's seconds in a phase on its slowest rank (empty where the phase was not timed)."""
    t = run.timings.get(phase)
    return t[run.measured].max(axis=1) if t is not None else np.zeros(0)


def slowest_rank_time(run: Run, phase: str) -> float:
    """Mean over measured steps of the slowest rank's seconds in a phase (step: what the FOM uses)."""
    t = slowest_rank_steps(run, phase)
    return float(t.mean()) if t.size else np.nan


@dataclass
class Spread:
    """A quantity over repeated runs (or steps): median, min..max, how many."""
    values: list

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return float(statistics.median(self.values)) if self.values else np.nan

    @property
    def lo(self) -> float:
        return float(min(self.values)) if self.values else np.nan

    @property
    def hi(self) -> float:
        return float(max(self.values)) if self.values else np.nan

    @property
    def range(self) -> float:
        return self.hi - self.lo

    @property
    def rel_half_range(self) -> float:
        """(max - min) / 2 / median: the +-fraction around the median; NaN below two values."""
        return self.range / 2 / abs(self.median) if self.n > 1 and self.median else np.nan

    def describe(self, spec: str = ".4g", unit: str = "", what: str = "runs") -> str:
        """'0.1234 s (0.1200..0.1300, +-4.0% over 3 runs)', or '... (single run: no spread)'."""
        if self.n == 0:
            return "-"
        med = f"{format(self.median, spec)}{unit}"
        if self.n == 1:
            return med + (" (single run: no spread)" if what == "runs" else f" (one {what[:-1]}: no spread)")
        return (f"{med} ({format(self.lo, spec)}..{format(self.hi, spec)}, +-{100 * self.rel_half_range:.1f}% "
                f"over {self.n} {what})")


def spread(values) -> Spread:
    """The finite values as a Spread."""
    return Spread([float(v) for v in values if v is not None and np.isfinite(v)])


def noisy(a: Spread, b: Spread):
    """Whether the spread of either side is larger than the difference of the medians: True, False, or None where
    one side has a single value (no spread to judge by)."""
    if a.n < 2 or b.n < 2:
        return None
    diff = abs(a.median - b.median)
    return bool(a.range > diff or b.range > diff)


def difference_note(what: str, base: Spread, other: Spread, steps=(), unit: str = "s") -> str:
    """A line saying whether a reported difference (other - base medians) stands out of the noise. With repeats on
    both sides: a WARNING where either side's spread (max - min) exceeds the difference. With a single run on a side:
    "single run: no spread", and a WARNING where the step-to-step range of a run's measured steps (steps: one Spread
    per run) exceeds the difference, the only sign of a busy machine such a run holds."""
    diff = abs(other.median - base.median)
    if base.n > 1 and other.n > 1:
        wide = max(base.range, other.range)
        if wide > diff:
            return (f"WARNING: {what}: the spread over repeats ({wide:.4g} {unit}) exceeds the difference "
                    f"({diff:.4g} {unit}): not significant")
        return f"{what}: spread over repeats {wide:.4g} {unit}, below the difference {diff:.4g} {unit}"
    line = f"{what}: single run: no spread"
    wide = max((s.range for s in steps if s.n > 1), default=np.nan)
    if wide > diff:
        line += (f"; WARNING: a run's measured steps vary by {wide:.4g} {unit}, more than the difference "
                 f"({diff:.4g} {unit}): not significant (a busy machine?); repeat the runs")
    return line
