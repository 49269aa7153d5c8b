"""Read miniLST metrics files (HDF5, schema "minilst-metrics") into numpy/pandas.

    runs = [load(p) for p in paths]
    timings_frame(runs)   # tidy: file, phase, step, rank, seconds, measured
    summary_frame(runs)   # one row per file
    comm_stats(run)       # per communication op: bytes per step per rank, measured vs analytic
    parallel_layout(run)  # attention strategy and the U x R x D decomposition
Unknown attributes, phases and memory categories are kept as they come.
"""
from __future__ import annotations

import os
import re
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
    """One row per file; <phase>_s = mean s/step averaged over ranks, step_s_mean = slowest rank."""
    rows = []
    for r in runs:
        a, mem = r.attrs, lambda k: float(r.memory[k].max()) / MIB if k in r.memory else np.nan
        row = dict(file=r.path, ranks=r.ranks, seq_len=_int(a.get("seq_len", r.cfg("run", "seq_len"))),
                   layers=r.cfg("model", "layers"), hidden=r.cfg("model", "hidden"),
                   policy=a.get("memory_policy", r.cfg("memory", "policy")),
                   precision=a.get("precision", r.cfg("run", "precision")), fom=a.get("fom", np.nan),
                   step_s_mean=step_time(r))
        row.update({f"{ph}_s": v for ph, v in phase_stats(r)["avg"].items()})
        row.update(device_total_MiB=mem("device_total"), activations_MiB=mem("activations"),
                   workspace_MiB=mem("workspace"), final_loss=r.loss[-1] if len(r.loss) else np.nan,
                   valid=a.get("valid"))
        rows.append(row)
    return pd.DataFrame(rows)
