#!/usr/bin/env bash
# scripts/bench/max_seq.sh's predictions and analysis stay runnable (no confirming
# runs here: they take minutes): every stack predicts an S that fits and an S + 1
# that does not, the CPU stack grows with each technique, the table and the PNG exist.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
OUT="$tmp/bench" MINILST="$MINILST" bash "$MINILST_SOURCE/scripts/bench/max_seq.sh" --no-runs --budget-mib 64 \
  > bench.log 2>&1 || { cat bench.log; exit 1; }
grep -E "vanilla|4 ranks" bench.log
"$PYTHON" - "$tmp/bench/max_seq.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
s = f["cpu/longest_seq_len"][:]
ok = np.all(np.diff(s[:7]) > 0) and len(f["llama3_8b/longest_seq_len"][:]) == 7
print(f"CPU stack S {s.tolist()}: {'grows with each technique' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
test -s "$tmp/bench/max_seq.png"
