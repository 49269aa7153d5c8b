#!/usr/bin/env bash
# scripts/bench/head_chunks.sh end to end, small (2 ranks, one round, d = 128, S = 256, 2 steps):
# every run is VALID, the table holds N = 1, 2, 4, 8 with their ratios to N = 1, the same
# all-to-all bytes for every N and fewer comm bytes for N = 8 than N = 1 (the analysis asserts
# measured memory = model), the PNG exists. Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
OUT="$tmp/bench" MINILST="$MINILST" bash "$MINILST_SOURCE/scripts/bench/head_chunks.sh" --rounds 1 \
  --deck "$MINILST_SOURCE/inputs/tiny.yaml" --set model.hidden=128 --set run.seq_len=256 --set run.steps=2 \
  --set run.warmup_steps=1 > bench.log 2>&1 || { cat bench.log; exit 1; }
grep -E "N = 4 / N = 1 step time" bench.log
"$PYTHON" - "$tmp/bench/head_chunks.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
n, a2a, comm = f["head_chunks"][:], f["comm/alltoall"][:], f["memory/comm"][:]
ok = list(n) == [1, 2, 4, 8] and np.all(f["step_ratio_to_unchunked"][:] > 0)
ok = ok and len(set(a2a)) == 1 and a2a[0] > 0 and comm[3] < comm[0]
print(f"head chunks {list(n)}: all-to-all {a2a[0]} B each, comm {comm[0]} -> {comm[3]} B" + ("" if ok else " FAIL"))
sys.exit(0 if ok else 1)
PY
test -s "$tmp/bench/head_chunks.png"
