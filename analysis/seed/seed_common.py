"""Shared by the seed-paper table analyses (analysis/seed/<paper>_table<N>.py).

Each scripts/bench/seed/<paper>_table<N>.sh leaves in its output directory a
rows.txt (name|kind|ranks|label|detail per row), a <name>.json per `minilst plan`
row and a <name>.h5 metrics file per real run. The analysis reads them with the
helpers below, puts miniLST's figures beside the paper's (the papers' numbers are
seed_papers.py's tables, cell by cell as printed) in `Compare` rows (paper, miniLST,
their ratio and what each side counts), and writes with `finish`: table.md (printed
too), <script>.h5 and <script>.png.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys

import time

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import seed_papers as sp  # noqa: E402


class _Metrics:
    """analysis/minilst_metrics.py, imported when first used (it brings pandas; the studies without a run
    never need it)."""

    def __getattr__(self, name):
        import minilst_metrics
        return getattr(minilst_metrics, name)


mm = _Metrics()

KiB, MiB, GiB = 2.0 ** 10, 2.0 ** 20, 2.0 ** 30
DEVICE = ("weights", "gradients", "optimizer", "activations", "workspace", "comm")
STATES = ("weights", "gradients", "optimizer")

PAPERS = {
    "mst": "MsT: Luo et al., Mini-Sequence Transformer: Optimizing Intermediate Memory for Long Sequences "
           "Training (arXiv 2407.15892)",
    "alst": "ALST: Bekman et al., Arctic Long Sequence Training: Scalable And Efficient Training For "
            "Multi-Million Token Sequences (arXiv 2506.13996)",
    "memo": "MEMO: Zhao et al., MEMO: Fine-grained Tensor Management For Ultra-long Context LLM Training "
            "(arXiv 2407.12117, SIGMOD 2025)",
    "rsa": "RSA: Li et al., Sequence Parallelism: Long Sequence Training from System Perspective "
           "(arXiv 2105.13120, ACL 2023)",
    "upipe": "UPipe: Untied Ulysses, Ulysses attention over chunks of heads (arXiv 2602.21196)",
}


# ---------------------------------------------------------------- reading a study's directory

class Study:
    """A seed script's output directory: its rows, plans and runs."""

    def __init__(self, directory: str, tiny: bool):
        self.dir, self.tiny = directory, tiny
        self.rows = {}
        for line in open(os.path.join(directory, "rows.txt")):
            if line.strip():
                name, kind, ranks, label, detail = (line.rstrip("\n").split("|", 4) + [""] * 5)[:5]
                self.rows[name] = dict(name=name, kind=kind, ranks=int(ranks), label=label, detail=detail)
        self._runs = {}

    def value(self, name: str) -> float:
        """A figure the script kept (lib.sh's `keep NAME VALUE`: NAME.txt)."""
        return float(open(os.path.join(self.dir, f"{name}.txt")).read())

    def kind(self, name: str) -> str:
        return self.rows.get(name, {}).get("kind", "missing")

    def why(self, name: str) -> str:
        """Why a row has no result ('' when it has one)."""
        r = self.rows.get(name)
        if r is None:
            return "not run by this variant of the script"
        return r["detail"] if r["kind"] == "skipped" else ""

    def plan(self, name: str) -> dict | None:
        p = os.path.join(self.dir, f"{name}.json")
        return json.load(open(p)) if self.kind(name) == "plan" and os.path.exists(p) else None

    def run(self, name: str):
        if self.kind(name) != "run":
            return None
        if name not in self._runs:
            r = mm.load(os.path.join(self.dir, f"{name}.h5"))
            if r.attrs.get("valid") != "PASSED":
                raise SystemExit(f"{name}.h5: the run is not VALID ({r.attrs.get('valid')})")
            self._runs[name] = r
        return self._runs[name]

    def runs(self):
        return [self.run(n) for n, r in self.rows.items() if r["kind"] == "run"]


def parse_args(doc: str):
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="the seed script's output directory")
    ap.add_argument("--tiny", action="store_true", help="the directory holds a --tiny (CI) variant")
    a = ap.parse_args()
    return Study(a.dir, a.tiny)


# ---------------------------------------------------------------- figures of one run

def step_s(run) -> float:
    """Mean seconds per measured step (the slowest rank's)."""
    return mm.step_time(run)


def phase_s(run, phase: str) -> float:
    t = run.timings.get(phase)
    return float(t[run.measured].mean()) if t is not None and run.measured.any() else math.nan


def mem(run, category: str) -> float:
    """Measured high-water bytes of a category, max over ranks (NaN if absent)."""
    v = run.memory.get(category)
    return float(np.max(v)) if v is not None else math.nan


def states(run) -> float:
    return sum(mem(run, c) for c in STATES)


def comm_bytes(run, op: str) -> float:
    """Bytes one rank sent per step for an operation (mean over steps and ranks; 0 if absent)."""
    d = run.comm.get(op)
    return float(np.mean(d["bytes"])) if d is not None and np.size(d.get("bytes", [])) else 0.0


def model_matches(run) -> bool:
    """Every device and host category and every communication op equal to the memory and
    communication models, on every rank (the byte-exact prediction miniLST promises)."""
    for cat, v in run.memory.items():
        if cat in run.model_memory and not np.array_equal(np.asarray(v), np.asarray(run.model_memory[cat])):
            return False
    cs = mm.comm_stats(run)
    return bool(cs.empty or cs["matches"].fillna(True).astype(bool).all())


def gflops_per_rank(run) -> float:
    """Model GFLOP/s per rank over the measured steps (the metrics' throughput/model_tflops)."""
    t = run.throughput.get("model_tflops")
    if t is None or not run.measured.any():
        return math.nan
    return float(np.mean(np.asarray(t)[run.measured])) * 1e3 / run.ranks


def plan_mem(plan: dict, category: str) -> float:
    return float(plan["memory_bytes"].get(category, 0))


def plan_states(plan: dict) -> float:
    return sum(plan_mem(plan, c) for c in STATES)


def machine(study: Study) -> str:
    """CPU model and vector ISA, from a metrics file of the study (else from this machine)."""
    for r in study.runs():
        if r.attrs.get("cpu_model"):
            return f"{r.attrs['cpu_model']} ({r.attrs.get('cpu_isa', '?')}), {r.ranks} rank(s) in that run"
    for name, row in study.rows.items():  # a benchmark's file (minilst_bench_mst) records the machine too
        path = os.path.join(study.dir, f"{name}.h5")
        if row["kind"] == "bench" and os.path.exists(path):
            with h5py.File(path, "r") as f:
                if "cpu_model" in f.attrs:
                    return f"{mm._decode(f.attrs['cpu_model'])} ({mm._decode(f.attrs.get('cpu_isa', '?'))})"
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
                 platform.processor()) if os.path.exists("/proc/cpuinfo") else platform.processor()
    return f"{model} (no run in this study)"


def mfu_note(runs):
    """A note when a run's MFU exceeds 1 (its start-up GEMM rate was measured low, e.g. on a busy machine)."""
    high = [r.name for r in runs if r is not None and float(r.attrs.get("mfu", 0) or 0) > 1]
    if not high:
        return []
    return [f"MFU above 1 in {', '.join(high)}: each run measures its GEMM rate once at start, and a rate taken "
            "while other work shared the cores is low. Compare the rows' step times (one invocation of the "
            "script runs them back to back), not their MFU."]


# ---------------------------------------------------------------- formatting

def tokens(n) -> str:
    """A sequence length as the papers write it: 32.0K, 1.10M (K = 10^3, M = 10^6, as ALST and MEMO count)."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    n = float(n)
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    if n >= 1e3:
        return f"{n / 1e3:.1f}K"
    return f"{n:.0f}"


def num(x, spec: str = ".3g", none: str = "-") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return none
    return format(x, spec)


def gib(b) -> str:
    return num(None if b is None else b / GiB, ".2f")


def mib(b) -> str:
    return num(None if b is None else b / MiB, ".2f")


def hms(seconds) -> str:
    if seconds is None:
        return "-"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def md_table(columns, rows) -> str:
    """A markdown table; rows are sequences of already formatted cells."""
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def nan(x) -> float:
    return math.nan if x is None else float(x)


# ---------------------------------------------------------------- paper against miniLST

class Compare:
    """Rows of a paper's cell against miniLST's figure for the same thing: the cell as printed with its
    table, the paper's figure in the comparison's unit, miniLST's, the ratio miniLST / paper, and the
    accounting difference (what one side counts that the other does not)."""

    def __init__(self, key: str, heading: str, unit: str, fmt: str = ".4g"):
        self.key, self.heading, self.unit, self.fmt, self.rows = key, heading, unit, fmt, []

    def add(self, label: str, table: "sp.PaperTable", row: str, column: str, ours, why: str = "",
            paper=None, ours_text: str | None = None, printed: str | None = None):
        """paper: the paper's figure in this unit (default: the cell parsed); ours: miniLST's (None or
        NaN: none, ours_text says why); printed: what to show of the paper (default: the cell)."""
        cell = table.cell(row, column)
        p = sp.parse(cell) if paper is None else paper
        o = math.nan if ours is None else float(ours)
        ratio = o / p if math.isfinite(o) and math.isfinite(p) and p else math.nan
        self.rows.append(dict(label=label, table=table.name, printed=printed or cell, paper=p, ours=o,
                              ours_text=ours_text, ratio=ratio, why=why))

    def md(self) -> str:
        rows = [[r["label"], f"{r['printed']} ({r['table']})",
                 r["ours_text"] if r["ours_text"] is not None else num(r["ours"], self.fmt),
                 num(r["ratio"], ".3g", "-"), r["why"]] for r in self.rows]
        return md_table(["row", "paper (as printed)", f"miniLST ({self.unit})", "miniLST / paper",
                         "accounting difference"], rows)

    def data(self) -> dict:
        g = f"compare/{self.key}"
        return {f"{g}/label": [r["label"] for r in self.rows], f"{g}/table": [r["table"] for r in self.rows],
                f"{g}/printed": [r["printed"] for r in self.rows], f"{g}/paper": [r["paper"] for r in self.rows],
                f"{g}/minilst": [r["ours"] for r in self.rows], f"{g}/ratio": [r["ratio"] for r in self.rows]}


# ---------------------------------------------------------------- writing the three outputs

def _h5_value(v):
    a = np.asarray(v)
    if a.dtype.kind in "UO":
        return np.asarray([str(x).encode() for x in a.ravel()]).reshape(a.shape)
    if a.dtype == bool:
        return a.astype(np.int8)
    return a


def finish(study: Study, script: str, paper: str, title: str, sections, notes, data: dict, figure,
           attrs: dict | None = None, papers=(), compares=()):
    """Writes table.md, <script>.h5 and <script>.png into the study's directory and prints table.md.

    sections: [(heading, markdown table)], notes: [str] (the differences, explained),
    data: {dataset path: array} (numbers as numbers, NaN where miniLST has no figure, strings as
    strings), figure: a matplotlib Figure, papers: the seed_papers tables the study compares with
    (printed whole, and every cell stored under paper/), compares: Compare rows (after the papers'
    tables, before `sections`)."""
    # when the rows ran: the script's rows.txt, written as each row finished
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(os.path.getmtime(os.path.join(study.dir, "rows.txt"))))
    md = [f"# {title}", "", f"Paper: {PAPERS[paper]}.", "",
          f"Machine: {machine(study)}; command `scripts/bench/seed/{script}.sh{' --tiny' if study.tiny else ''}`;"
          f" rows run by {when}.", ""]
    for t in papers:
        md += [f"## {t.name} as printed ({t.what}; {t.unit or 'see the heads'})", "", t.md(), ""]
        if t.unreadable:
            md += [f"From the extracted text: {t.unreadable}.", ""]
    for c in compares:
        md += [f"## {c.heading}", "", c.md(), ""]
        data.update(c.data())
    for heading, table in sections:
        md += [f"## {heading}", "", table, ""]
    if notes:
        md += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    text = "\n".join(md)
    with open(os.path.join(study.dir, "table.md"), "w") as f:
        f.write(text)
    print(text)
    with h5py.File(os.path.join(study.dir, f"{script}.h5"), "w") as h:
        h.attrs.update({"schema": "minilst-seed-table", "script": script, "paper": PAPERS[paper], "title": title,
                        "tiny": int(study.tiny), "machine": machine(study)})
        for k, v in (attrs or {}).items():
            h.attrs[k] = v
        cells = [(t.name, r, c, v) for t in papers for r, c, v in t.cells()]
        if cells:
            for i, k in enumerate(("table", "row", "column", "printed")):
                data[f"paper/cells/{k}"] = [x[i] for x in cells]
            h.attrs["paper_tables"] = ", ".join(t.name for t in papers)
        for path, v in data.items():
            h.create_dataset(path, data=_h5_value(v))
    figure.savefig(os.path.join(study.dir, f"{script}.png"), dpi=130, bbox_inches="tight")
    plt.close(figure)
    print(f"wrote {study.dir}/table.md, {script}.h5, {script}.png")


# ---------------------------------------------------------------- longest-sequence studies

LONGEST_COLUMNS = ["stack", "ranks", "longest S", "x the group's first row", "step s", "device MiB measured",
                   "device MiB predicted", "measured = model"]


def longest_seq_rows(study: Study, names, group=lambda name: ""):
    """CPU-scale rows of a longest-sequence study: each name's plan (NAME.json, --max-seq-len) and its
    confirming run (NAME_run.h5, one step at that S); S also as a multiple of the first row of the
    same group(name). Returns (markdown rows, data dict of arrays)."""
    rows, S, meas, model, ok, step = [], [], [], [], [], []
    firsts = {}
    for n in names:
        first = firsts.get(group(n))
        r = study.rows.get(n, {})
        p, run = study.plan(n), study.run(f"{n}_run")
        if p is None:
            rows.append([r.get("label", n), r.get("ranks", ""), "skipped: " + study.why(n)] + [""] * 5)
            S.append(math.nan), meas.append(math.nan), model.append(math.nan), ok.append(True), step.append(math.nan)
            continue
        first = firsts.setdefault(group(n), p["seq_len"])
        m, pm = (mem(run, "device_total") if run else math.nan), plan_mem(p, "device_total")
        good = run is None or (model_matches(run) and m == pm)
        rows.append([r["label"], r["ranks"], f"{p['seq_len']:,}", num(p["seq_len"] / first, ".1f"),
                     num(step_s(run) if run else None, ".3f"), mib(m) if run else "not run", mib(pm),
                     ("yes" if good else "**no**") if run else ""])
        S.append(p["seq_len"]), meas.append(m), model.append(pm), ok.append(good)
        step.append(step_s(run) if run else math.nan)
    return rows, {"longest_seq_len": S, "device_bytes_measured": meas, "device_bytes_model": model,
                  "measured_equals_model": ok, "step_s": step}


def longest_compare(study: Study, key: str, heading: str, table, rows, k: float = 1e3) -> Compare:
    """A Compare of longest sequences: rows are (label, paper row, plan name, accounting difference[,
    paper column: the first by default]); the paper's cell counts thousands of tokens (K = 10^3, as MsT
    writes 60k; k sets it), miniLST's is the plan's longest S (--max-seq-len)."""
    c = Compare(key, heading, "tokens", ",.0f")
    for label, row, name, why, *column in rows:
        col = column[0] if column else table.columns[0]
        p = study.plan(name)
        c.add(label, table, row, col, p["seq_len"] if p else None, why,
              paper=sp.parse(table.cell(row, col)) * k,
              ours_text=None if p else "skipped: " + study.why(name))
    return c
