#!/usr/bin/env bash
# scripts/bench/zero.sh end to end on the tiny deck (2 ranks, one round): every run
# is VALID, the table holds the 8 configurations with their ratios to stage 0 and
# the per-rank model-state bytes (the analysis asserts measured = model), the PNG
# exists. Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
OUT="$tmp/bench" MINILST="$MINILST" bash "$MINILST_SOURCE/scripts/bench/zero.sh" --rounds 1 \
  --deck "$MINILST_SOURCE/inputs/tiny.yaml" > bench.log 2>&1 || { cat bench.log; exit 1; }
grep -E "stage 3 / stage 0" bench.log
"$PYTHON" - "$tmp/bench/zero.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
stages, off = f["zero_stage"][:], f["optimizer_offload"][:]
ok = sorted(zip(stages, off)) == [(s, o) for s in range(4) for o in (0, 1)]
ok = ok and np.all(f["step_ratio_to_stage0"][:] > 0) and f["memory/host_optimizer"][:][off == 1].min() > 0
print(f"{len(stages)} configurations" + ("" if ok else " FAIL"))
sys.exit(0 if ok else 1)
PY
test -s "$tmp/bench/zero.png"
