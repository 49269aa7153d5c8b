#!/usr/bin/env python3
"""analysis/longest_account.py's MEMO rows (docs/validation.md, "The longest sequences, buffer by buffer").

Checks that the account explains what it claims to: each ALST row counted at ALST's length fits an H100
(the count is a floor) and miniLST's plan reaches that length; for each of MEMO's longest rows bounded by device
memory, MEMO's system counted term by term fits an A800 at the paper's length and not at the next one
in MEMO's table; the count's model states agree with miniLST's plan of the same layout (two independent
counts: Megatron's bytes per parameter over MEMO's GPT, miniLST's plan over its Llama form); miniLST's
plan at the paper's length holds less than the count and reaches at least the paper's length. Then the
script runs whole and prints every table.
"""
import os
import subprocess
import sys

source = os.environ.get("MINILST_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
minilst = os.environ.get("MINILST", os.path.join(source, "build", "minilst"))
sys.path.insert(0, os.path.join(source, "analysis"))
import longest_account as la  # noqa: E402

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


p = la.Planner(minilst, source)
for label, model, k, nxt, mark, tp, cp, dp, kind in la.MEMO_ROWS:
    at = sum(la.memo_count(model, k, tp, cp, dp, kind).values())
    after = sum(la.memo_count(model, nxt, tp, cp, dp, kind).values())
    check(at <= la.A800_BYTES < after,
          f"{label}: MEMO's count {at / la.GIB:.1f} GiB at {k}K fits the A800's {la.A800_BYTES / la.GIB:.1f}, "
          f"{after / la.GIB:.1f} GiB at {nxt}K does not")
    states, rest, longest = la.memo_minilst(p, model, k, tp, cp, kind)
    counted = la.memo_count(model, k, tp, cp, dp, kind)["states"]
    check(abs(states / counted - 1) < 0.05,
          f"{label}: model states, miniLST's plan {states / la.GIB:.2f} GiB against Megatron's count {counted / la.GIB:.2f}")
    check(states + rest < at, f"{label}: miniLST's plan at {k}K ({(states + rest) / la.GIB:.1f} GiB) holds less than MEMO's count")
    check(longest >= k * la.K, f"{label}: miniLST's longest {longest:,} reaches the paper's {k * la.K:,}")

# ALST's rows: its stack counted at the length it ran fits the H100 (the count is a floor), and miniLST reaches it
m = la.model_of(p, "inputs/llama3_8b.yaml", [])
for label, gpus, S, U, tmlp, off, tloss in la.ALST_ROWS:
    total = sum(la.alst_count(gpus, S, U, tmlp, off, tloss, m).values())
    longest, _ = la.alst_minilst(p, gpus, S, U, tmlp, off, tloss)
    check(total <= la.H100_MIB and longest >= S,
          f"ALST {label}: counted {total:,.0f} MiB within the H100's {la.H100_MIB:,}; miniLST's longest {longest:,} >= {S:,}")

# the host rows: the count at the paper's length fits the node (the rounding is the docs' hypothesis, not checked)
for label, model, k, nxt, tp, cp, alpha in la.MEMO_HOST_ROWS:
    host = la.memo_host(model, k, tp, cp, alpha)
    check(host <= la.MEMO_HOST_BYTES, f"{label}: host count {host / la.GIB:,.0f} GiB at {k}K within the node's 2 TB")

out = subprocess.run([sys.executable, os.path.join(source, "analysis", "longest_account.py"), "--minilst", minilst,
                      "--source", source], capture_output=True, text=True)
rows = [line for line in out.stdout.splitlines() if line.startswith("| ") and "---" not in line]
expected = 4 + len(la.MST_ROWS) + len(la.ALST_ROWS) + len(la.MEMO_ROWS) + len(la.MEMO_HOST_ROWS)  # four header lines
check(out.returncode == 0 and len(rows) == expected,
      f"longest_account.py runs (exit {out.returncode}) and prints {len(rows)} table lines, expected {expected}"
      + (f": {out.stderr.strip()[-300:]}" if out.returncode else ""))
sys.exit(1 if failures else 0)
