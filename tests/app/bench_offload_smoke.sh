#!/usr/bin/env bash
# scripts/bench/offload.sh end to end on the tiny deck (4 layers, 2 steps): every
# run is VALID, the table file holds every run and the headline ratios, the PNG
# exists. Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
OUT="$tmp/bench" MINILST="$MINILST" bash "$MINILST_SOURCE/scripts/bench/offload.sh" "$MINILST_SOURCE/inputs/tiny.yaml" \
  --set model.layers=4 --set run.steps=2 > bench.log 2>&1 || { cat bench.log; exit 1; }
grep -E "auto_overhead|throttled_auto_alpha|longest_seq_len" bench.log
"$PYTHON" - "$tmp/bench/offload_bench.h5" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
runs = [r.decode() for r in f["run"][:]]
want = ["full", "checkpoint", "checkpoint_offload", "offload_auto", "offload_1_throttled", "longest_offload"]
missing = [w for w in want if w not in runs]
keys = ["auto_overhead", "alpha1_activations", "throttled_auto_alpha", "throttled_auto_wait"]
ok = not missing and all(k in f.attrs for k in keys) and 0 <= f.attrs["throttled_auto_alpha"] <= 1
print(f"{len(runs)} runs in the table; missing {missing}" + ("" if ok else " FAIL"))
sys.exit(0 if ok else 1)
PY
test -s "$tmp/bench/offload_bench.png"
