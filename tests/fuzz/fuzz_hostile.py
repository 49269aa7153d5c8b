#!/usr/bin/env python3
"""A hostile campaign over every command and analysis script: each case runs one command (run, plan, plan
--machine, probe, verify, validate, result, keys, and the analysis scripts summarize.py, compare.py,
predicted_vs_measured.py, plot_validation.py) with one hostile ingredient: an input that is a FIFO, a directory,
a device, a link to /dev/zero, empty, binary, oversized, nested too deep or holding odd numbers; an output aimed
at a user's file, a FIFO, a link, a directory or a device; an environment variable with a runaway or garbage
value; or a signal at a random moment.

Every case must: end within its limit (no hang), end with an exit code, never by a signal (no crash); leave
every file that was there before as it was (no data loss; only a command's own earlier output of its kind may
be replaced), and no half-written file; refuse (exit 2) naming what it refuses where the ingredient is invalid
(a refusal's message names the file, flag, key or variable), never accept it silently.

  tests/fuzz/fuzz_hostile.py --cases 2000 --seed 1 --jobs 2      # the long campaign (docs/tests.md)
Environment: MINILST (the program), MINILST_SOURCE (the source tree), PYTHON (the analysis interpreter).
Exit 0 when every case holds, 1 otherwise (each failure printed with its command line).
"""
import argparse
import concurrent.futures
import hashlib
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

MINILST = os.environ.get("MINILST", "build/minilst")
SOURCE = os.environ.get("MINILST_SOURCE", ".")
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
TINY = os.path.join(SOURCE, "inputs", "tiny.yaml")
MACHINE = os.path.join(SOURCE, "machines", "h100-sxm-8gpu-ib400.yaml")
BASE_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
for k in ("OMP_NUM_THREADS", "KOKKOS_TOOLS_LIBS", "SLURM_JOB_END_TIME", "SLURM_STEP_NUM_TASKS"):
    BASE_ENV.pop(k, None)

# Inputs, by how they are hostile: (name, maker(dir) -> path, valid?)
def _fifo(d):
    p = os.path.join(d, "in.fifo")
    os.mkfifo(p)
    return p


def _write(name, data):
    def make(d):
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(data)
        return p
    return make


def _link(name, target):
    def make(d):
        p = os.path.join(d, name)
        os.symlink(target, p)
        return p
    return make


def _dir(d):
    p = os.path.join(d, "in_dir")
    os.mkdir(p)
    return p


def _mutated(source, old, new, name):
    def make(d):
        text = open(source).read()
        p = os.path.join(d, name)
        with open(p, "w") as f:
            f.write(text.replace(old, new, 1) if old else text + new)
        return p
    return make


DECK_NUMBERS = [("seq_len: 37", f"seq_len: {v}") for v in ("1e300", "0x40", "+64", "-0", "64.0", "9007199254740993",
                                                           "18446744073709551617", "nan", "inf", "6 4")] + \
               [("hidden: 40", "hidden: 40\n  rope_theta: 1e-320"), ("hidden: 40", "hidden: 40\n  rope_theta: 1e400"),
                ("seq_len: 37", "seq_len: 37\n  documents: fixed:1e300"), ("seq_len: 37", "seq_len: 37\n  documents: \" \"")]
MACHINE_NUMBERS = [("square: 742000", f"square: {v}") for v in ("1e300", "989000000", "1e-310", "-1", "nan", "0x10")] + \
                  [("ranks_per_node: 8", f"ranks_per_node: {v}") for v in ("10000000000", "1e10", "8.5")] + \
                  [("", "ranks_per_node: 8\n"), ("", "---\nname: x\n"),
                   ("", "attention_probe:\n  heads_per_kv: 2\n  head_dim: 3\n")]


def input_kinds(source):
    kinds = [("fifo", _fifo, False), ("dir", _dir, False), ("devzero", _link("in_zero", "/dev/zero"), False),
             ("devnull", _link("in_null", "/dev/null"), False), ("empty", _write("in_empty", b""), False),
             ("binary", _write("in_bin", bytes(range(256)) * 64), False),
             ("huge", _write("in_huge", b"a: 1\n" * 400000), False),
             ("deep", _write("in_deep", b"model: " + b"[" * 5000 + b"]" * 5000 + b"\n"), False),
             ("missing", lambda d: os.path.join(d, "no_such_file"), False),
             ("dangling", _link("in_dangling", "/nonexistent/x"), False)]
    numbers = DECK_NUMBERS if source == TINY else MACHINE_NUMBERS
    # Named by the key the mutation sets (its last line), or "documents" where it starts a second
    # YAML document: the refusal names the file's second document, not a key.
    kinds += [(f"number:{'documents' if new.startswith('---') else new.strip().splitlines()[-1].split(':')[0].strip()}",
               _mutated(source, old, new, "in_num.yaml"), False)
              for old, new in numbers]
    kinds += [("good", lambda d, s=source: shutil.copy(s, os.path.join(d, "in_good.yaml")), True)] * 3
    return kinds


# Outputs, by what is at the name already.
OUTPUT_KINDS = ["new", "new", "user_metrics", "user_deck", "fifo", "link_to_user", "dir", "devnull", "no_dir"]

ENVS = [("OMP_NUM_THREADS", "100000"), ("OMP_NUM_THREADS", "abc"), ("OMP_NUM_THREADS", "0"),
        ("KOKKOS_TOOLS_LIBS", "/etc/passwd"), ("KOKKOS_TOOLS_LIBS", "/dev/zero"), ("SLURM_JOB_END_TIME", "garbage"),
        ("SLURM_JOB_END_TIME", "1e300"), ("SLURM_STEP_NUM_TASKS", "x"), ("OPENBLAS_NUM_THREADS", "99999999")]
SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGPIPE, signal.SIGQUIT]


class Case:
    def __init__(self, index, rng, sample):
        self.index, self.rng, self.sample = index, rng, sample
        self.ingredient = ""     # what is hostile, for the message check
        self.also = []           # other names a refusal may name instead (a second hostile ingredient)
        self.valid = True        # whether the command should succeed
        self.replaceable = set()  # files the command may replace (its own earlier output)
        self.signal = None
        self.env = dict(BASE_ENV)
        self.limit = 60

    def user_files(self, d):
        shutil.copy(self.sample, os.path.join(d, "user_metrics.h5"))
        shutil.copy(TINY, os.path.join(d, "user_deck.yaml"))

    def output(self, d, kind, name):
        """A path for the command's output, and whether writing there is allowed."""
        p = os.path.join(d, name)
        if kind == "user_metrics":  # an earlier run's metrics file: a run may replace it (its own kind), nothing else
            path = os.path.join(d, "user_metrics.h5")
            if self.command == "run":
                self.replaceable.add(path)
            return path, self.command == "run"
        if kind == "user_deck":
            return os.path.join(d, "user_deck.yaml"), False
        if kind == "fifo":
            os.mkfifo(p)
            return p, False
        if kind == "link_to_user":
            os.symlink(os.path.join(d, "user_deck.yaml"), p)
            return p, False
        if kind == "dir":
            os.mkdir(p)
            return p, False
        if kind == "devnull":
            return "/dev/null", False
        if kind == "no_dir":  # a run makes its output's directory; the other commands refuse
            return os.path.join(d, "no_such_dir", name), self.command == "run"
        return p, True

    def build(self, d):
        rng = self.rng
        command = rng.choice(["run", "run", "plan", "plan_machine", "plan_machine", "probe", "verify", "validate",
                              "result", "keys", "summarize", "compare", "predicted", "plot_validation"])
        self.command = command
        hostile = rng.choice(["input", "input", "output", "env", "signal"])
        self.ingredient_kind = hostile
        deck, machine, metrics = TINY, MACHINE, os.path.join(d, "user_metrics.h5")
        consumes = command not in ("probe", "validate", "keys")
        if hostile == "input" and not consumes:
            hostile = "signal"
        self.ingredient_kind = hostile
        if hostile == "input":
            source = MACHINE if command == "plan_machine" else TINY
            name, make, valid = rng.choice(input_kinds(source))
            path = make(d)
            # a refusal names the file, or for a number the key that holds it
            reads_yaml = command in ("run", "plan", "plan_machine", "verify")
            self.valid, self.ingredient = valid, (name.split(":", 1)[1] if name.startswith("number:") and reads_yaml
                                                  else os.path.basename(path))
            if command == "plan_machine":
                machine = path
            elif command in ("result", "summarize", "compare", "predicted"):
                metrics = path
            elif command == "plot_validation":
                metrics = path
            else:
                deck = path
            self.what = f"input {name}"
        writes = command in ("run", "probe", "verify", "validate", "summarize")
        if hostile == "output" and not writes:
            hostile = self.ingredient_kind = "signal"
        out_kind = rng.choice(OUTPUT_KINDS) if hostile == "output" else "new"
        if hostile == "env":
            var, value = rng.choice(ENVS)
            self.env[var], self.ingredient, self.what = value, var, f"env {var}={value}"
            # what the libraries read at start-up: refused by every command that starts them (not `result`, which
            # reads a file alone, nor the Python scripts, which start none)
            self.valid = command in ("result", "summarize", "compare", "predicted", "plot_validation")
        if hostile == "signal":
            self.signal, self.delay = rng.choice(SIGNALS), rng.uniform(0.05, 2.0)
            self.what = f"signal {self.signal.name} after {self.delay:.2f}s"
        if hostile == "output":
            self.what = f"output {out_kind}"
        argv, self.limit = self.argv(d, command, deck, machine, metrics, out_kind)
        self.argv_ = argv

    def argv(self, d, command, deck, machine, metrics, out_kind):
        M, rng = MINILST, self.rng
        short = ["--set", "run.steps=2", "--set", "run.warmup_steps=1"]
        if command == "run":
            out, ok = self.output(d, out_kind, "out.h5")
            self.valid &= ok
            self.ingredient = self.ingredient or os.path.basename(out)
            return [M, "run", deck, *short, "--set", f"output.metrics={out}"], 60
        if command == "plan":
            return [M, "plan", deck] + (["--format", "json"] if rng.random() < 0.5 else []), 30
        if command == "plan_machine":
            return [M, "plan", TINY, "--machine", machine, "--format", rng.choice(["json", "text"])], 30
        if command == "probe":
            out, ok = self.output(d, out_kind, "probe.yaml")
            self.valid &= ok
            self.ingredient = self.ingredient or os.path.basename(out)
            size = rng.choice(["16", "16", "16", "100000", "0", "1e9"])
            if size != "16":
                self.valid = False
                self.also.append("--size")
            return [M, "probe", "--out", out, "--size", size, "--repeats", "1", "--comm-mib", "0.25"], 120
        if command == "verify":
            out, ok = self.output(d, out_kind, "v.h5")
            self.valid &= ok
            self.ingredient = self.ingredient or os.path.basename(out)
            return [M, "verify", deck, "--set", f"output.metrics={os.path.join(d, 'vm.h5')}", "--out", out], 60
        if command == "validate":
            out, ok = self.output(d, out_kind, "v.json")
            self.valid &= ok
            self.ingredient = self.ingredient or os.path.basename(out)
            return [M, "validate", "--out", out, "--table", "alst_table1"], 60
        if command == "result":
            return [M, "result", metrics], 30
        if command == "keys":
            return [M, "keys"] + (["--machine"] if rng.random() < 0.5 else []), 30
        script = {"summarize": "summarize.py", "compare": "compare.py", "predicted": "predicted_vs_measured.py",
                  "plot_validation": "plot_validation.py"}[command]
        args = [metrics, metrics] if command == "compare" else [metrics]
        if command in ("summarize", "compare"):
            out, ok = self.output(d, out_kind, "table.csv")
            self.valid &= ok
            args += ["--csv", out] if command == "summarize" else []
        if command == "predicted" and self.ingredient_kind != "input":
            self.valid = False  # the user's metrics file has no prediction: refused, naming it
            self.ingredient = "user_metrics.h5"
        if command == "plot_validation" and self.ingredient_kind != "input":
            self.valid, self.ingredient = False, "user_metrics.h5"  # an HDF5 file is not validate's JSON
        return [PYTHON, os.path.join(SOURCE, "analysis", script), *args], 90


def digests(d):
    out = {}
    for root, dirs, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                out[p] = hashlib.sha256(open(p, "rb").read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                out[p] = "link:" + os.readlink(p)
            else:
                out[p] = f"mode:{stat.S_IFMT(st.st_mode)}"
    return out


def run_case(index, seed, sample, root):
    rng = random.Random(seed * 1000003 + index)
    d = tempfile.mkdtemp(prefix=f"case{index}_", dir=root)
    c = Case(index, rng, sample)
    c.user_files(d)
    c.build(d)
    before = digests(d)
    start = time.time()
    p = subprocess.Popen(c.argv_, cwd=d, env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        if c.signal:
            try:
                p.wait(timeout=c.delay)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, c.signal)
        out, err = p.communicate(timeout=c.limit)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        hung = True
    rc, took = p.returncode, time.time() - start
    err = err.decode("utf-8", "replace")
    problems = []
    if hung:
        problems.append(f"hang (past {c.limit} s)")
    elif (rc < 0 or rc >= 128) and (c.signal is None or (-rc if rc < 0 else rc - 128) != int(c.signal)):
        # ended by a signal it was not sent (the one it was sent may end it before its handlers are installed)
        problems.append(f"crash: ended by signal {-rc if rc < 0 else rc - 128}")
    after = digests(d)
    for path, digest in before.items():
        if path in c.replaceable:
            continue
        if after.get(path) != digest:
            problems.append(f"data loss: {os.path.relpath(path, d)} {'changed' if path in after else 'removed'}")
    partial = [p_ for p_ in after if p_.endswith(".partial")]
    if partial:
        problems.append(f"half-written file left: {os.path.relpath(partial[0], d)}")
    if not hung and c.signal is None:
        if not c.valid and rc == 0:
            problems.append("silent acceptance (exit 0)")
        if rc == 2 and c.ingredient and not any(n in err for n in [c.ingredient, *c.also]) and not c.valid:
            problems.append(f"a refusal that does not name {c.ingredient!r}: {err.strip().splitlines()[-1][:160] if err.strip() else '(nothing)'}")
        if rc == 2 and not err.strip():
            problems.append("exit 2 without a message")
    shutil.rmtree(d, ignore_errors=True)
    return c, rc, took, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="fuzz_hostile_")
    sample = os.path.join(root, "sample.h5")
    r = subprocess.run([MINILST, "run", TINY, "--set", "run.steps=2", "--set", "run.warmup_steps=1", "--set",
                        f"output.metrics={sample}"], env=BASE_ENV, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"fuzz_hostile: the sample run failed: {r.stderr.decode()[-400:]}")
    failures, counts = 0, {}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for c, rc, took, problems in pool.map(lambda i: run_case(i, a.seed, sample, root), range(a.cases)):
            counts[c.command] = counts.get(c.command, 0) + 1
            for problem in problems:
                failures += 1
                print(f"FAIL case {c.index} ({c.command}, {c.what}, exit {rc}, {took:.1f} s): {problem}\n"
                      f"  {' '.join(c.argv_)}")
    shutil.rmtree(root, ignore_errors=True)
    print(f"fuzz_hostile: {a.cases} cases (" + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) +
          f"): {failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
