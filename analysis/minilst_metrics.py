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
Unknown attributes, phases and memory categories are kept as they come. load reads a file in a child process
and raises MetricsError (one line) for a file it cannot read, corrupt ones included (docs/analysis.md).
"""
from __future__ import annotations

import csv
import datetime
import faulthandler
import glob
import math
import os
import pickle
import re
import signal
import stat
import statistics
import sys
import warnings
from dataclasses import dataclass, field

import stop_signals  # noqa: F401  (a stop signal ends an analysis with a line and exit 4)

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
    """A file that is missing, is not a miniLST metrics file, or is unreadable; the message is one line that names
    the file and what is wrong."""


# Reading a file that may be corrupt. HDF5 itself can crash on one (HDF5 1.10 copies past a variable-length string's
# heap object whose size is corrupt; no check of the structure can tell beforehand), so each file is read in a forked
# child process under a time and memory limit: a crash, a hang or a runaway allocation there is a MetricsError here.
READ_SECONDS = 60                 # a metrics file reads in well under a second
READ_MEMORY = 8 << 30             # bytes the child may allocate beyond what it holds at the fork
MAX_VALUES = 1 << 28              # a dataset claiming more values has a corrupt dataspace
# Attributes the readers turn into numbers: whole numbers (int(float(v))) and reals (float(v)).
WHOLE_NUMBER_ATTRS = ("warmup_steps", "jobsize", "ulysses", "ulysses_head_chunks", "ring", "data_parallel",
                      "sequence_parallel", "seq_len", "grad_accum", "zero_stage")
REAL_ATTRS = ("fom", "tokens_per_step", "flops_per_step", "peak_gflops_per_rank", "nominal_peak_gflops_per_rank",
              "tokens_per_joule", "energy_joules", "energy_joules_run", "offload_alpha", "node_load_other_cores",
              "node_load_steal_fraction", "node_load_average")
REAL_ATTR_PREFIXES = ("mfu", "flops_per_step_")
TEXT_ATTRS = ("schema", "valid", "complete", "stop_reason", "config", "reportable", "reportable_reasons",
              "mfu_convention", "mfu_peak_kind", "mfu_peak_source")


def _decode(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray):
        return _decode(v.item()) if v.size == 1 else [_decode(x) for x in v.tolist()]
    return v.item() if isinstance(v, np.generic) else v


def _int(v):
    return int(v) if isinstance(v, (int, float)) and float(v).is_integer() else v


def one_line(text) -> str:
    """text on one line (control characters as '?'), at most 300 characters."""
    line = re.sub(r"[\x00-\x1f\x7f]", "?", str(text))
    return line if len(line) <= 300 else line[:297] + "..."


class _Unreadable(Exception):
    """Raised while reading: what is wrong with the file (MetricsError adds the file's name)."""


def _check_dataset(name: str, obj, ndims=(1, 2)):
    """A dataset of numbers with 1 or 2 dimensions and a sane number of values (before reading it)."""
    if not isinstance(obj, h5py.Dataset):
        raise _Unreadable(f"{name} is not a dataset")
    if not (obj.dtype.kind in "iu" and obj.dtype.itemsize in (1, 2, 4, 8) or obj.dtype.kind == "f" and
            obj.dtype.itemsize in (4, 8)):
        raise _Unreadable(f"{name} does not hold standard numbers (type {obj.dtype})")
    if obj.ndim not in ndims:
        raise _Unreadable(f"{name} has {obj.ndim} dimension(s), not {' or '.join(map(str, ndims))}")
    if obj.size > MAX_VALUES:
        raise _Unreadable(f"{name} claims {obj.size} values")


def _dataset(parent, name: str, where: str, ndims=(1, 2)):
    """The dataset `name` of parent ("<where>/<name>" in messages) checked and read, or None for a subgroup."""
    try:
        obj = parent[name]
    except Exception as e:  # noqa: BLE001 (h5py's KeyError, OSError, ... with HDF5's reason)
        raise _Unreadable(f"{where}/{name}: {_h5_reason(e)}") from None
    if isinstance(obj, h5py.Group):
        return None
    _check_dataset(f"{where}/{name}", obj, ndims)
    return np.asarray(obj[()])


def _datasets(group, where: str, ndims=(1, 2)) -> dict:
    """The datasets directly in a group, checked and read (subgroups skipped)."""
    found = {k: _dataset(group, k, where, ndims) for k in group}
    return {k: v for k, v in found.items() if v is not None}


def _group(parent, name: str, where: str):
    """The subgroup `name` of parent, or {} where there is none; one HDF5 cannot open is unreadable."""
    if name not in parent:
        return {}
    try:
        obj = parent[name]
    except Exception as e:  # noqa: BLE001
        raise _Unreadable(f"{where}: {_h5_reason(e)}") from None
    return obj if isinstance(obj, h5py.Group) else {}


def _check_attrs(attrs: dict):
    """Every attribute a string, number or list of them; those the readers convert, convertible."""
    for k in attrs:
        if not isinstance(k, str):
            raise _Unreadable(f"an attribute's name is not text ({one_line(k)[:40]})")
    for k, v in attrs.items():
        values = v if isinstance(v, list) else [v]
        if not all(isinstance(x, (str, int, float, bool)) for x in values):
            raise _Unreadable(f"attribute {k!r} has an unexpected type")
    for k in WHOLE_NUMBER_ATTRS:
        try:
            ok = k not in attrs or (math.isfinite(float(attrs[k])) and float(attrs[k]).is_integer()
                                    and float(attrs[k]) >= 0)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise _Unreadable(f"attribute {k!r} is {one_line(attrs[k])[:40]!r}, not a whole number")
    for k, v in attrs.items():
        if (k in REAL_ATTRS or k.startswith(REAL_ATTR_PREFIXES)) and k not in TEXT_ATTRS and not isinstance(v, (int, float)):
            raise _Unreadable(f"attribute {k!r} is not a number")
        if k in TEXT_ATTRS and not isinstance(v, str):
            raise _Unreadable(f"attribute {k!r} is not a string")


def _check_shapes(run):
    """Timings [steps, ranks] of one shape, memory [ranks], throughput [steps]: what the readers index together."""
    shapes = {k: v.shape for k, v in run.timings.items()}
    if len(set(shapes.values())) > 1:
        raise _Unreadable("the /timings datasets differ in shape: " + ", ".join(f"{k} {s}" for k, s in shapes.items()))
    for where, group in (("memory", run.memory), ("memory/model", run.model_memory)):
        for k, v in group.items():
            if v.ndim != 1 or (run.timings and v.size != run.ranks):
                raise _Unreadable(f"/{where}/{k} has shape {v.shape}, not [{run.ranks}] (ranks)")
    for k, v in run.throughput.items():
        if v.ndim != 1 or (run.timings and v.size != run.steps):
            raise _Unreadable(f"/throughput/{k} has shape {v.shape}, not [{run.steps}] (steps)")


def _config(text) -> dict:
    """The resolved deck: a mapping of sections (mappings); anything else, or YAML that does not parse, is {}."""
    try:
        config = yaml.load(text or "", Loader=_Loader)
    except yaml.YAMLError:
        return {}
    if not isinstance(config, dict):
        return {}
    return {k: v for k, v in config.items() if isinstance(v, dict)}


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


def _read(path: str) -> Run:
    """The whole file, checked as it is read (in the reading process)."""
    if not h5py.is_hdf5(path):
        raise MetricsError(f"{path}: not an HDF5 file, not a metrics file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise _Unreadable(f"HDF5 cannot open it ({_h5_reason(e)})") from None
    with f:
        attrs = {k: _decode(v) for k, v in f.attrs.items()}
        if attrs.get("schema") != SCHEMA:
            found = "no schema attribute" if "schema" not in attrs else \
                f"schema attribute {one_line(attrs['schema'])[:40]!r}"
            raise MetricsError(f"{path}: not a miniLST metrics file ({found}, expected {SCHEMA!r})")
        _check_attrs(attrs)
        mem, timing_group = _group(f, "memory", "/memory"), _group(f, "timings", "/timings")
        model = _datasets(_group(mem, "model", "/memory/model"), "/memory/model", (1,)) if mem else {}
        timings = {k: v if v.ndim == 2 else v[:, None] for k, v in _datasets(timing_group, "/timings").items()}
        loss = _dataset(f, "loss", "", (1,)) if "loss" in f else None
        loss = np.zeros(0) if loss is None else loss
        run = Run(path, attrs, {}, loss, timings, _datasets(mem, "/memory", (1,)), model,
                  _datasets(_group(f, "throughput", "/throughput"), "/throughput", (1,)))
        run.timing_attrs = {k: {a: _decode(v) for a, v in timing_group[k].attrs.items()} for k in timings}
        for k, a in run.timing_attrs.items():
            if not isinstance(a.get("Avg time/rank", 0.0), (int, float)):
                raise _Unreadable(f"attribute 'Avg time/rank' of /timings/{k} is not a number")
        comm = _group(f, "comm", "/comm")
        for op in comm:
            group = _group(comm, op, f"/comm/{op}")
            if group:
                run.comm[op] = _datasets(group, f"/comm/{op}")
    _check_shapes(run)
    run.config = _config(attrs.get("config"))
    w = attrs.get("warmup_steps", run.cfg("run", "warmup_steps", 0))
    try:
        run.warmup = int(min(max(int(w or 0), 0), run.steps))
    except (TypeError, ValueError):
        raise _Unreadable(f"the warm-up steps ({one_line(w)[:40]!r}) are not a number") from None
    return run


def _h5_reason(e: Exception) -> str:
    """What HDF5 said, without h5py's wrapping: "Unable to open file (truncated file: ...)" -> "truncated file: ..."."""
    text = one_line(e)
    m = re.fullmatch(r"'?Unable to [^(]*\((.*)\)'?", text)
    return m.group(1) if m else text


def _path_problem(path: str):
    """What the file system says before HDF5 is asked (missing, a directory, not a regular file, unreadable, empty),
    or None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "no such file"
    except OSError as e:
        return one_line(e.strerror or e)
    if stat.S_ISDIR(st.st_mode):
        return "a directory, not a metrics file"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a device, pipe or socket), not a metrics file"
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        return f"cannot be read: {one_line(e.strerror or e)}"
    return "empty (0 bytes), not a metrics file" if st.st_size == 0 else None


def _read_or_message(path: str):
    """("run", Run) or ("error", one-line message): what the reading process sends back."""
    try:
        return "run", _read(path)
    except MetricsError as e:
        return "error", one_line(e)
    except MemoryError:
        return "error", f"{path}: unreadable: reading it needs more than {READ_MEMORY >> 20} MiB more memory"
    except _Unreadable as e:
        return "error", f"{path}: unreadable: {one_line(e)}"
    except Exception as e:  # h5py's errors on a corrupt file: KeyError, RuntimeError, OSError, ValueError, ...
        return "error", f"{path}: unreadable: {_h5_reason(e) or type(e).__name__}"


def _child_limits():
    """In the reading process: silent (no crash report of Python's, stderr to /dev/null: the C library's "free():
    invalid pointer" before it aborts; the reply says what happened), a time limit, an address-space limit."""
    faulthandler.disable()
    for sig in (signal.SIGALRM, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGABRT):
        signal.signal(sig, signal.SIG_DFL)
    os.environ["LIBC_FATAL_STDERR_"] = "1"  # those messages to stderr, not to the terminal
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
    except OSError:
        pass
    signal.alarm(READ_SECONDS)
    try:
        import resource
        with open("/proc/self/statm") as fh:
            held = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (held + READ_MEMORY, held + READ_MEMORY))
    except (ImportError, OSError, ValueError):
        pass


def _child_failure(path: str, status: int) -> str:
    """Why a reading process that sent nothing back ended."""
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
        return f"{path}: unreadable: reading it took longer than {READ_SECONDS} s (the HDF5 library looping on it?)"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"{path}: unreadable: the HDF5 library crashed reading it (signal {sig}, {signal.strsignal(sig)})"
    return f"{path}: unreadable: the reading process failed (exit code {os.waitstatus_to_exitcode(status)})"


def _read_isolated(path: str, reader=None):
    """reader(path) (default _read_or_message: a pair (kind, value)) in a forked child process where fork exists; a
    child that sends nothing back gives ("error", why it ended)."""
    reader = reader or _read_or_message
    if not hasattr(os, "fork"):
        return reader(path)
    r, w = os.pipe()
    with warnings.catch_warnings():  # Python 3.12 warns about fork in a process with threads (BLAS's)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: read, send, end without running the parent's exit handlers
        code = 1
        try:
            os.close(r)
            _child_limits()
            with os.fdopen(w, "wb") as out:
                out.write(pickle.dumps(reader(path)))
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return "error", _child_failure(path, status)
    return pickle.loads(data)  # our own child's bytes


def load(path: str) -> Run:
    """Read one metrics file. Raises MetricsError, its message one line naming the file and what is wrong, for a
    missing file, one that is not a metrics file, or one that is unreadable (corrupt, truncated, inconsistent);
    HDF5's own diagnostics are never printed and its crashes end only the process that reads the file."""
    problem = _path_problem(path)
    if problem:
        raise MetricsError(f"{path}: {problem}")
    kind, value = _read_isolated(path)
    if kind == "error":
        raise MetricsError(value)
    return value


def read_with(path: str, reader):
    """reader(h5py.File) -> value, run as load runs its reader: the path checked first (a FIFO, device or directory
    refused, never opened), the file read in a child process (a corrupt file that crashes HDF5 ends only that
    process); raises MetricsError (one line naming the file) for every failure."""
    problem = _path_problem(path)
    if problem:
        raise MetricsError(f"{path}: {problem}")

    def child(p):
        try:
            with h5py.File(p, "r") as f:
                return "value", reader(f)
        except MetricsError as e:
            return "error", one_line(e)
        except Exception as e:  # noqa: BLE001 (h5py's errors on a corrupt file, a missing group, a bad value)
            return "error", f"{p}: unreadable: {_h5_reason(e) or type(e).__name__}"
    kind, value = _read_isolated(path, child)
    if kind == "error":
        raise MetricsError(value)
    return value


def read_text_file(path: str, limit: int = 16 << 20) -> str:
    """A small text file (a plan's JSON, a table) read the way miniLST reads its inputs: a regular file of at most
    `limit` bytes, opened without blocking; raises MetricsError (one line naming the file) otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise MetricsError(f"{path}: {'no such file' if isinstance(e, FileNotFoundError) else one_line(e.strerror or e)}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise MetricsError(f"{path}: {'a directory' if stat.S_ISDIR(st.st_mode) else 'not a regular file'}")
        data = os.read(fd, limit + 1)
        if len(data) > limit:
            raise MetricsError(f"{path}: larger than {limit} bytes")
    except OSError as e:
        raise MetricsError(f"{path}: cannot be read: {one_line(e.strerror or e)}")
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise MetricsError(f"{path}: not UTF-8 text")


# Outputs: what an analysis writes (a table, a plot) follows miniLST's own rule (docs/metrics.md, "Who owns an
# output"): checked before the work; a name holding a symbolic link, a FIFO, a device or a directory is refused, and
# a regular file there is replaced only when it is this kind's own earlier output (a plot carrying the marker
# below, a table with the same header line); the file is written whole under a temporary name, then renamed.
FIGURE_MARKER = "miniLST analysis"


def output_problem(path: str, flag: str = "output"):
    """Why `path` cannot take an analysis output (one line naming the flag and the path), or None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path))
        return None if os.path.isdir(parent) else f"{flag} {path}: its directory does not exist"
    except OSError as e:
        return f"{flag} {path}: {one_line(e.strerror or e)}"
    if stat.S_ISLNK(st.st_mode):
        return f"{flag} {path}: a symbolic link: nothing is written through it"
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO, device or socket"
        return f"{flag} {path}: {kind}, not a file: not replaced"
    return None


def _head(path: str, n: int = 65536) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return os.read(fd, n)
    finally:
        os.close(fd)


def _write_whole(path: str, flag: str, write, ours):
    """write(tmp) makes the file under a temporary name; it takes `path` if nothing is there, or replaces a regular
    file there that ours(its first bytes) accepts; MetricsError otherwise (the temporary file removed)."""
    problem = output_problem(path, flag)
    if problem:
        raise MetricsError(problem)
    if os.path.exists(path) and not ours(_head(path)):
        raise MetricsError(f"{flag} {path}: exists and is not an earlier output of this kind: not replaced (choose "
                           "another name, or remove it)")
    tmp = f"{path}.{os.uname().nodename.split('.')[0]}-{os.getpid()}-{os.urandom(4).hex()}.partial"
    try:
        write(tmp)
        if os.path.lexists(path):
            os.replace(tmp, path)  # the approved file (checked just above)
        else:
            try:
                os.link(tmp, path)  # never over a file put there meanwhile
            except FileExistsError:
                raise MetricsError(f"{flag} {path}: a file appeared there meanwhile: not replaced")
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def write_text_output(path: str, text: str, flag: str = "output"):
    """A table (CSV, Markdown): replaces an earlier one only where its first line is this one's."""
    data = text.encode("utf-8")
    first = data.split(b"\n", 1)[0]

    def write(tmp):
        with open(tmp, "xb") as f:
            f.write(data)
    _write_whole(path, flag, write, lambda head: head.split(b"\n", 1)[0] == first)


def save_figure(fig, path: str, flag: str = "--png", dpi: int = 110):
    """A PNG: marked as an analysis plot, so that only such a plot is ever replaced."""
    _write_whole(path, flag, lambda tmp: fig.savefig(tmp, format="png", dpi=dpi, metadata={"Software": FIGURE_MARKER}),
                 lambda head: head.startswith(b"\x89PNG") and FIGURE_MARKER.encode() in head)


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
        b = np.asarray(d.get("bytes", np.zeros((0, 0))), dtype=float)  # absent in a file without per-step counts
        if b.size == 0:
            b = np.zeros((0, 0))
        else:
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
    step_s_mean = slowest rank; verdict = VALID, INVALID or INCOMPLETE; reportable = the run rules' verdict
    ("?" for files before the rules)."""
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
                   verdict=verdict(a), reportable=reportable(a))
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------------------
# Finding metrics files. A run names its file as the user or the program chose (metrics.h5 in older job and sweep
# directories, <deck>_<layout>_<N>r_<UTC>_<job>_<pid>.h5 now): recognise it by its schema attribute, not its name.

def _schema(path: str):
    """("schema", the root attribute schema or None) or ("error", why): in the reading process."""
    try:
        with h5py.File(path, "r") as f:
            return "schema", _decode(f.attrs.get("schema"))
    except Exception as e:  # noqa: BLE001 (any error of a corrupt file)
        return "error", one_line(e)


def is_metrics_file(path: str) -> bool:
    """True for an HDF5 file whose root attribute schema is SCHEMA; False for anything else or an unreadable file
    (read in a child process, as load does: a corrupt file that crashes HDF5 is not one)."""
    if _path_problem(path) or not h5py.is_hdf5(path):
        return False
    return _read_isolated(path, _schema) == ("schema", SCHEMA)


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
    """The launch date, YYYY-MM-DD: launchdate_utc (ISO 8601), else launchdate (Adiak's seconds
    since the epoch; older files: ISO 8601 text)."""
    utc = text(attrs, "launchdate_utc")
    if utc:
        return utc[:10]
    raw = text(attrs, "launchdate", "?")
    try:
        return datetime.datetime.fromtimestamp(float(raw), datetime.timezone.utc).strftime("%Y-%m-%d")
    except (ValueError, OverflowError, OSError):
        return raw[:10]


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


def verdict(a):
    """VALID, INVALID or INCOMPLETE, as the RESULT line spells it: the `verdict` attribute (older files:
    from `complete` and `valid`)."""
    if a.get("verdict"):
        return text(a, "verdict")
    if str(text(a, "complete", "true")).lower() != "true":
        return "INCOMPLETE"
    return "VALID" if text(a, "valid") == "PASSED" else "INVALID"


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

def phases(run: Run) -> list:
    """The run's timed phases in the program's order: the file's own list (its `phases` attribute, written from
    the one table in src/core/phases.hpp); files written before it: the members of /timings."""
    listed = text(run.attrs, "phases")
    return listed.split() if listed else list(run.timings)


def check_phase(run: Run, phase: str) -> str:
    """`phase` itself, when the file times it; a name the file's list lacks (a misspelt phase) is an error."""
    if text(run.attrs, "phases") and phase not in phases(run):
        raise MetricsError(f"{run.path}: no phase '{phase}' (the file's phases: {', '.join(phases(run))})")
    return phase


def slowest_rank_steps(run: Run, phase: str) -> np.ndarray:
    """Each measured step's seconds in a phase on its slowest rank (empty where a file before the phase did not
    time it; a phase the file's list lacks is an error)."""
    t = run.timings.get(check_phase(run, phase))
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
