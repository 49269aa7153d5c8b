#!/usr/bin/env bash
# scripts/bench/step.sh end to end on a small float deck: miniLST and the PyTorch
# peer both run, the table file holds both implementations' phases and the ratio,
# the PNG exists. Environment (set by ctest): MINILST_BIN_DIR, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
OUT="$tmp/bench" bash "$MINILST_SOURCE/scripts/bench/step.sh" "$MINILST_SOURCE/inputs/tiny.yaml" --rounds 1 \
  --attention-seq-len 256 --set run.precision=float --set run.steps=3 --set run.seq_len=64 > bench.log 2>&1 \
  || { cat bench.log; exit 1; }
grep -E "ratio|attention kernel alone" bench.log
"$PYTHON" - "$tmp/bench/step_bench.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
need = [f"{i}/{p}_s" for i in ("minilst", "pytorch") for p in ("step", "attention", "mlp", "lm_head", "optimizer")]
missing = [n for n in need if n not in f]
ok = not missing and np.all(f["ratio"][:] > 0) and f.attrs["sgemm_gflops"] > 0 and "attention_kernel_gflops" in f.attrs
print(f"step_bench.h5: ratio {f['ratio'][:]}, missing {missing}" + ("" if ok else " FAIL"))
sys.exit(0 if ok else 1)
PY
test -s "$tmp/bench/step_bench.png"
