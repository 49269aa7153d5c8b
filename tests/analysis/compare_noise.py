#!/usr/bin/python3
"""analysis/compare.py's noise test on synthesized metrics files (h5py): two sweeps of one commit on one
2-core host, the same points (tiny, 2 ranks, Ulysses), 2 repeats each.

- "packed": the second sweep ran its points two at a time on the node (both jobs' ranks on cores 0 and 1,
  launched together): each run is 2x slower than the first sweep's, with tight repeats (the old test, spread
  against difference, said noise? = no). compare.py must say noise? = yes and name the placement.
- "steps": the second sweep ran alone but its measured steps vary by more than the 2x gap (a busy machine):
  noise? = yes from the step-to-step spread.
- "real": the second sweep ran alone, tight repeats and tight steps, 2x slower (a real regression): noise? = no.
- "shared": the second sweep's own ranks share a core (cores_shared = yes): noise? = yes.

Usage: compare_noise.py [DIR] (scratch files; default a temporary directory).
"""
import csv
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPARE = os.path.join(ROOT, "analysis", "compare.py")
HOST = "node1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from synth_metrics import write_run  # noqa: E402


def sweep(dir_, runs):
    """runs: [(step seconds, start, cores of each rank, note)] -> one metrics file each in dir_."""
    os.makedirs(dir_, exist_ok=True)
    for i, r in enumerate(runs):
        steps, start, cores, note = r
        write_run(os.path.join(dir_, f"run_{i}.h5"), steps, start=start, cores_of_rank=cores, note=note)
    return dir_


def steps_of(t, jitter=0.0, n=6, seed=0):
    """n step times around t (the warm-up first, 1.5 t), each measured one within +-jitter of t."""
    rng = np.random.default_rng(seed)
    return [1.5 * t] + list(t * (1 + jitter * rng.uniform(-1, 1, n - 1)))


def compare(a, b, name):
    csv_path = os.path.join(os.path.dirname(a), f"{name}.csv")
    out = subprocess.run([sys.executable, COMPARE, f"first={a}", f"second={b}", "--csv", csv_path],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"FAIL: {name}: compare.py exited {out.returncode}: {out.stderr}")
    rows = [r for r in csv.DictReader(open(csv_path)) if r["source"] == "second"]
    if len(rows) != 1:
        sys.exit(f"FAIL: {name}: expected one compared point, got {len(rows)}")
    return rows[0], out.stdout


def main(tmp):
    t0 = 1.7e9
    alone = [[0], [1]]  # rank 0 on core 0, rank 1 on core 1
    # The first sweep: each point alone on the node, one after the other, 0.1 s steps, tight.
    first = sweep(os.path.join(tmp, "first"),
                  [(steps_of(0.100, 0.01, seed=i), t0 + 100 * i, alone, "") for i in range(2)])
    checks = []

    # Two points at once on the 2-core node: both jobs' ranks on cores 0 and 1, 2x slower, tight repeats.
    packed = sweep(os.path.join(tmp, "packed"),
                   [(steps_of(0.200, 0.01, seed=10 + i), t0 + 1000, alone, "") for i in range(2)])
    row, text = compare(first, packed, "packed")
    ratio = float(row["ratio_to_reference"])
    if not 0.45 < ratio < 0.55:
        sys.exit(f"FAIL: packed: the synthesized gap should be 2x, ratio {ratio}")
    checks.append(("packed", row["noise"] == "yes" and "ran beside" in text and "placement" in text
                   and row["noise_reason"].startswith("placement: "),
                   f"noise {row['noise']}"))

    # Alone, but each run's measured steps range over 150% of their median (> the 120% gap): a busy machine.
    wild = [0.3, 0.05, 0.2, 0.35, 0.2]
    busy = sweep(os.path.join(tmp, "busy"),
                 [([0.3] + wild[i:] + wild[:i], t0 + 2000 + 100 * i, alone, "") for i in range(2)])
    row, text = compare(first, busy, "busy")
    checks.append(("steps", row["noise"] == "yes" and "step-to-step" in text, f"noise {row['noise']}"))

    # Alone, tight, 2x slower: a real difference, not noise.
    slow = sweep(os.path.join(tmp, "slow"),
                 [(steps_of(0.200, 0.01, seed=30 + i), t0 + 3000 + 100 * i, alone, "") for i in range(2)])
    row, text = compare(first, slow, "real")
    checks.append(("real", row["noise"] == "no" and row["noise_reason"] == "", f"noise {row['noise']}"))

    # Alone, but the job's two ranks on one core (cores_shared = yes).
    shared = sweep(os.path.join(tmp, "shared"),
                   [(steps_of(0.200, 0.01, seed=40 + i), t0 + 4000 + 100 * i, [[0], [0]], f"core 0 on {HOST}: ranks 0 and 1")
                    for i in range(2)])
    row, text = compare(first, shared, "shared")
    checks.append(("shared", row["noise"] == "yes" and "share a core" in text, f"noise {row['noise']}"))

    bad = [c for c in checks if not c[1]]
    for name, ok, what in checks:
        print(f"{name}: {what}: {'ok' if ok else 'FAIL'}")
    if bad:
        sys.exit(f"FAIL: {', '.join(c[0] for c in bad)}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as scratch:
        main(sys.argv[1] if len(sys.argv) > 1 else scratch)
