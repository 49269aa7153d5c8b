#!/usr/bin/env bash
# The mini-sequence benchmark stays runnable: a small sweep, its HDF5 layout,
# measured workspace equal to the analytic one, and the plot script's PNG.
# Environment (set by ctest): MINILST_BENCH_MST, MINILST_SOURCE, PYTHON.
set -euo pipefail
: "${MINILST_BENCH_MST:?}" "${MINILST_SOURCE:?}"
PYTHON=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$MINILST_BENCH_MST" --seq-lens 64,200 --chunks 1,3,16 --hidden 32 --intermediate 48 --vocab 300 \
  --repeats 1 --output "$tmp/b.h5"
"$PYTHON" "$MINILST_SOURCE/analysis/plot_mst_bench.py" "$tmp/b.h5" --png "$tmp/b.png"
"$PYTHON" - "$tmp/b.h5" "$tmp/b.png" <<'PY'
import os, sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
assert f.attrs["schema"] == "minilst-bench-mst" and f.attrs["sgemm_gflops"] > 0
for block in ("mlp", "lm_head"):
    ws, model, t = (f[block][k][:] for k in ("workspace_bytes", "model_workspace_bytes", "seconds"))
    assert ws.shape == (2, 3) and np.all(t > 0), block
    assert np.array_equal(ws, model), f"{block}: measured {ws} != analytic {model}"
    assert np.all(np.diff(ws, axis=1) < 0), f"{block}: workspace must fall with M"
assert os.path.getsize(sys.argv[2]) > 10000
print("bench smoke: ok")
PY
