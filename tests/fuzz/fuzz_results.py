#!/usr/bin/python3
"""Fuzzing the readers of a metrics file: `minilst result` and analysis/summarize.py.

A real metrics file (a tiny run's, or --metrics FILE) is copied N times with 1-8 random bytes
replaced, 1-8 bits flipped, or the file cut short, in a temporary directory (never the
checkout). On every copy:
  - `minilst result` ends with an exit code below 128 (no crash) within its limit; exit 2
    prints exactly one line, on stderr, naming the file; exits 0, 3 and 4 exactly one
    RESULT line, on stdout;
  - summarize.py (files in batches) ends below 128; each file is either summarized (its path
    on its header line) or named by exactly one error line on stderr, never both; nothing
    else on stderr;
  - neither prints HDF5's diagnostics or a Python traceback.
First the pristine file (read back as its run printed it) and the files that are not
metrics files (missing, empty, a directory, a FIFO, text, HDF5 of another schema,
unreadable): one line each, exit 2.

    fuzz_results.py [--files N] [--seed S] [--jobs J] [--metrics FILE] [--keep DIR]

Environment: MINILST (the program), MINILST_SOURCE (the source tree), PYTHON (ctest sets them).
--keep DIR saves each failing input there with a line saying what failed.
"""
import argparse
import concurrent.futures
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HDF5_NOISE = re.compile(r"HDF5-DIAG|^\s*#\d{3}: |^\s*(major|minor): |Traceback \(most recent call last\)")
RESULT_SECONDS = 60      # a limit per `minilst result` (its own reading limit is 20 s)
SUMMARIZE_SECONDS = 600  # a limit per batch of summarize.py
ROUND = 1000             # corrupt copies written, read and removed at a time (a long campaign's disk)


# `minilst result` starts MPI (one rank) before it reads: Open MPI's singleton start-up, with no
# daemon and no network, is a third of its default (other MPIs ignore these variables). Such
# singletons share one session directory name, so each gets one of its own.
QUICK_MPI = {"OMPI_MCA_ess_singleton_isolated": "1", "OMPI_MCA_btl": "self", "OMPI_MCA_pml": "ob1"}


def run(cmd, cwd, limit):
    """(exit code, stdout lines, stderr lines); 137 when killed at the limit."""
    session = tempfile.mkdtemp(dir=cwd)
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=limit, text=True, errors="replace",
                           env={**os.environ, **QUICK_MPI, "OMPI_MCA_orte_tmpdir_base": session})
    except subprocess.TimeoutExpired as e:
        return 137, (e.stdout or "").splitlines(), ["(killed after %d s)" % limit]
    finally:
        shutil.rmtree(session, ignore_errors=True)
    code = p.returncode if p.returncode >= 0 else 128 - p.returncode
    return code, p.stdout.splitlines(), p.stderr.splitlines()


def noise(lines):
    """The lines of HDF5's diagnostics or of a traceback."""
    return [line for line in lines if HDF5_NOISE.search(line)]


def check_result(minilst, path, cwd, expect_exit=None):
    """What is wrong with `minilst result PATH` (None: nothing), its exit code and its one line."""
    code, out, err = run([minilst, "result", path], cwd, RESULT_SECONDS)
    first = (err + out + [""])[0]
    if code >= 128:
        return f"minilst result crashed or hung (exit {code}): {(err or out or [''])[-1]}", code, first
    if noise(out + err):
        return f"HDF5 diagnostics or a traceback: {noise(out + err)[0]}", code, first
    if expect_exit is not None and code != expect_exit:
        return f"exit {code}, expected {expect_exit}: {first}", code, first
    if code == 2:
        if out or len(err) != 1:
            return f"exit 2 with {len(out)} line(s) on stdout and {len(err)} on stderr, not one on stderr", code, first
        if not err[0].startswith(f"error: result: '{path}'"):
            return f"the error line does not name the file: {first}", code, first
    elif code in (0, 3, 4):
        if err or len(out) != 1 or not out[0].startswith("RESULT: "):
            return f"exit {code} without exactly one RESULT line: {first}", code, first
    else:
        return f"exit {code}: " + " | ".join(line for line in err + out if line.strip("-")), code, first
    return None, code, first


def check_summarize(python, script, paths, cwd):
    """What is wrong with summarize.py on these files: {path: problem}; the unreadable ones; how many of those
    crashed HDF5."""
    code, out, err = run([python, script, *paths], cwd, SUMMARIZE_SECONDS)
    problems, named = {}, {}
    if code >= 128:
        return {p: f"summarize.py crashed or hung on its batch (exit {code})" for p in paths}, set(), 0
    for line in err:
        m = re.match(r"summarize\.py: error: (\S+): ", line)
        if not m or m.group(1) not in paths:
            return {p: f"summarize.py printed on stderr: {line}" for p in paths}, set(), 0
        named[m.group(1)] = named.get(m.group(1), 0) + 1
    summarized = {line.split()[0] for line in out if re.match(r"   \S+ \(schema v", line)}
    for p in paths:
        if named.get(p, 0) > 1:
            problems[p] = f"summarize.py named it on {named[p]} lines"
        elif (p in named) == (p in summarized):
            problems[p] = "summarize.py both summarized it and named it" if p in named else \
                "summarize.py neither summarized it nor named it"
    if noise(out + err):
        problems.setdefault(paths[0], f"HDF5 diagnostics or a traceback: {noise(out + err)[0]}")
    if (code == 2) != bool(named):
        problems.setdefault(paths[0], f"summarize.py exit {code} with {len(named)} unreadable file(s)")
    return problems, set(named), sum("library crashed" in line for line in err)


def mutate(data, rng):
    """A corrupt copy of data and what was done to it."""
    b = bytearray(data)
    kind = rng.choice(("bytes", "bits", "truncate"))
    if kind == "truncate":
        n = rng.randrange(len(b))
        return bytes(b[:n]), f"cut to {n} bytes"
    changes = []
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(b))
        if kind == "bytes":
            b[at] = rng.randrange(256)
            changes.append(f"{at}={b[at]:#04x}")
        else:
            bit = rng.randrange(8)
            b[at] ^= 1 << bit
            changes.append(f"{at}^bit{bit}")
    return bytes(b), f"{kind} " + " ".join(changes)


def make_metrics(minilst, source, path):
    """A tiny run's metrics file at path (its directory the run's working directory); its RESULT line."""
    code, out, err = run([minilst, "run", os.path.join(source, "inputs", "tiny.yaml"), "--set",
                          f"output.metrics={path}"], os.path.dirname(path), 300)
    if code != 0:
        sys.exit(f"fuzz_results: the tiny run failed (exit {code}): {(err + out + [''])[-1]}")
    return next(line for line in out if line.startswith("RESULT: "))


def corrupt_string_size(data):
    """data with the size of the first object of its first global heap (where HDF5 keeps the variable-length
    strings: the schema attribute's) made 1 MiB: HDF5 1.10.8 copies past its buffer and crashes reading it.
    None where the file has no global heap."""
    heap = data.find(b"GCOL")
    if heap < 0:
        return None
    out = bytearray(data)
    struct.pack_into("<Q", out, heap + 16 + 8, 1 << 20)  # the collection's 16-byte header, then the object's
    return bytes(out)


def not_metrics_files(tmp, base):
    """Paths that are not metrics files or that no reader can read, by what they are (a missing one, an empty
    file, ...); base: a metrics file."""
    d = os.path.join(tmp, "cases")
    os.makedirs(os.path.join(d, "dir.h5"))
    open(os.path.join(d, "empty.h5"), "wb").close()
    with open(os.path.join(d, "text.h5"), "w") as fh:
        fh.write("not HDF5\n")
    os.mkfifo(os.path.join(d, "fifo.h5"))
    cases = {"missing": os.path.join(d, "missing.h5"), "empty": os.path.join(d, "empty.h5"),
             "a directory": os.path.join(d, "dir.h5"), "a FIFO": os.path.join(d, "fifo.h5"),
             "text": os.path.join(d, "text.h5")}
    try:
        import h5py
        with h5py.File(os.path.join(d, "other.h5"), "w") as f:
            f.attrs["schema"] = "something-else"
        cases["HDF5 of another schema"] = os.path.join(d, "other.h5")
    except ImportError:
        pass
    with open(base, "rb") as fh:
        crashing = corrupt_string_size(fh.read())
    if crashing:
        with open(os.path.join(d, "heap.h5"), "wb") as fh:
            fh.write(crashing)
        cases["a string's heap object of a corrupt size"] = os.path.join(d, "heap.h5")
    if os.geteuid() != 0:  # root reads any file
        shutil.copy(base, os.path.join(d, "locked.h5"))
        os.chmod(os.path.join(d, "locked.h5"), 0)
        cases["unreadable"] = os.path.join(d, "locked.h5")
    return cases


class Campaign:
    """The checks and their tally; failing inputs copied to keep (with base.h5, what they were made from)."""

    def __init__(self, args, tmp):
        self.minilst, source = os.environ["MINILST"], os.environ["MINILST_SOURCE"]
        self.python = os.environ.get("PYTHON") or "/usr/bin/python3"
        self.source, self.summarize = source, os.path.join(source, "analysis", "summarize.py")
        self.args, self.tmp, self.base = args, tmp, os.path.join(tmp, "tiny.h5")
        self.failures, self.codes, self.unreadable = 0, {}, 0
        self.crashes = self.summarize_crashes = 0  # HDF5 crashes each reader contained

    def fail(self, path, what, why):
        self.failures += 1
        print(f"FAIL {what}: {why}", flush=True)
        if self.args.keep and os.path.isfile(path):
            os.makedirs(self.args.keep, exist_ok=True)
            shutil.copy(self.base, os.path.join(self.args.keep, "base.h5"))
            name = os.path.basename(path)
            shutil.copy(path, os.path.join(self.args.keep, name))
            with open(os.path.join(self.args.keep, name + ".txt"), "w") as fh:
                fh.write(f"{what}: {why}\n")

    def result(self, path, what, expect_exit=None):
        """minilst result on one file, tallied."""
        why, code, line = check_result(self.minilst, path, self.tmp, expect_exit)
        self.crashes += "library crashed" in line
        if why:
            self.fail(path, f"minilst result on {what}", why)
        return code

    def pristine(self):
        """The file the copies are made from reads back as its run printed it; summarize.py reads it."""
        if self.args.metrics:
            shutil.copy(self.args.metrics, self.base)
            expected = None
        else:
            expected = make_metrics(self.minilst, self.source, self.base)
        code, out, _ = run([self.minilst, "result", self.base], self.tmp, RESULT_SECONDS)
        if code >= 128 or len(out) != 1 or (expected and out[0] != expected):
            self.fail(self.base, "the pristine file", f"minilst result gave exit {code}: {out}")
        problems, _, _ = check_summarize(self.python, self.summarize, [self.base], self.tmp)
        for why in problems.values():
            self.fail(self.base, "the pristine file", why)

    def fixed_cases(self):
        """Files that are not metrics files or crash HDF5: exit 2 and one line from each reader. Their count."""
        cases = not_metrics_files(self.tmp, self.base)
        for what, path in cases.items():
            self.result(path, what, expect_exit=2)
        problems, named, crashes = check_summarize(self.python, self.summarize, list(cases.values()), self.tmp)
        self.summarize_crashes += crashes
        for what, path in cases.items():
            if path in problems or path not in named:
                self.fail(path, f"summarize.py on {what}", problems.get(path, "read as a metrics file"))
        return len(cases)

    def corrupt_copies(self, pool, first, count, rng):
        """count corrupt copies (numbered from first) through both readers, then removed."""
        with open(self.base, "rb") as fh:
            data = fh.read()
        folder = tempfile.mkdtemp(dir=self.tmp)
        how = {}
        for i in range(first, first + count):
            mutant, what = mutate(data, rng)
            path = os.path.join(folder, f"m{i:06d}.h5")
            with open(path, "wb") as fh:
                fh.write(mutant)
            how[path] = f"{os.path.basename(path)} ({what})"
        paths = list(how)
        for code in pool.map(lambda p: self.result(p, how[p]), paths):
            self.codes[code] = self.codes.get(code, 0) + 1
        batches = [paths[i:i + self.args.batch] for i in range(0, len(paths), self.args.batch)]
        for problems, named, crashes in pool.map(lambda b: check_summarize(self.python, self.summarize, b, self.tmp),
                                                 batches):
            self.unreadable += len(named)
            self.summarize_crashes += crashes
            for path, why in problems.items():
                self.fail(path, f"summarize.py on {how[path]}", why)
        shutil.rmtree(folder)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=150, help="corrupt copies to read")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="readers run at once")
    ap.add_argument("--batch", type=int, default=50, help="files per summarize.py run")
    ap.add_argument("--metrics", help="the metrics file to corrupt (default: a tiny run's)")
    ap.add_argument("--keep", help="a directory for the failing inputs")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="minilst_fuzz_results_")
    try:
        t0, c = time.time(), Campaign(args, tmp)
        c.pristine()
        cases = c.fixed_cases()
        rng = random.Random(args.seed)
        with concurrent.futures.ThreadPoolExecutor(max(args.jobs, 1)) as pool:
            for first in range(0, args.files, ROUND):  # a round's copies on disk at a time
                c.corrupt_copies(pool, first, min(ROUND, args.files - first), rng)
        readable = sum(n for code, n in c.codes.items() if code in (0, 3, 4))
        print(f"fuzz_results: {cases} files that are not metrics files or crash HDF5, {args.files} corrupt copies "
              f"(seed {args.seed}) in {time.time() - t0:.0f} s; minilst result: {readable} read, "
              f"{c.codes.get(2, 0)} unreadable ({c.crashes} HDF5 crash(es) contained); summarize.py: "
              f"{args.files - c.unreadable} read, {c.unreadable} unreadable ({c.summarize_crashes} HDF5 crash(es) "
              f"contained); {c.failures} failure(s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
