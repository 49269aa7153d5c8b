#!/usr/bin/env bash
# Determinism: the same deck twice with the same threads gives bitwise-identical
# losses and gradients. Where Kokkos runs OpenMP threads (OMP_NUM_THREADS > 1), a
# run on one Kokkos thread is bitwise identical too (miniLST's kernels give every
# output one writer and reduce in a fixed order, whatever the thread count), and
# OpenBLAS on 2 threads agrees to float rounding (its threaded GEMM may split the
# sums differently). Deck: inputs/default.yaml on one rank, S = 256, float.
source "$(dirname "$0")/common.sh"
run() {  # run NAME KOKKOS_THREADS [BLAS_THREADS]
  OMP_NUM_THREADS=$2 OPENBLAS_NUM_THREADS=${3:-1} "$MINILST" run "$MINILST_SOURCE/inputs/default.yaml" --set parallel.ring=1 \
    --set run.seq_len=256 --set reference.losses= --set run.steps=3 --set output.dump="$1_dump.h5" --set output.metrics="$1.h5" > "$1.log" 2>&1 \
    || { cat "$1.log"; exit 1; }
}
threads=${OMP_NUM_THREADS:-1}
run a "$threads"
run b "$threads"
run one 1
run blas2 1 2
"$PYTHON" - "$threads" <<'PY'
import sys
import h5py, numpy as np
threads = int(sys.argv[1])
def load(name):
    d, m = h5py.File(f"{name}_dump.h5", "r"), h5py.File(f"{name}.h5", "r")
    return {k: d["grads"][k][:] for k in d["grads"]}, m["loss"][:], m.attrs["kokkos_execution_space"], int(m.attrs["kokkos_threads"])
a, b, one, blas2 = load("a"), load("b"), load("one"), load("blas2")
def diff(x, y):
    g = max(np.abs(x[0][k] - y[0][k]).max() / max(np.abs(x[0][k]).max(), 1e-30) for k in x[0])
    return g, np.abs(x[1] - y[1]).max()
g, l = diff(a, b)
print(f"{a[2]} x {a[3]} threads, twice: max relative gradient difference {g:.3g}, loss difference {l:.3g}")
ok = g == 0 and l == 0
if a[3] > 1:
    g1, l1 = diff(a, one)
    print(f"{a[3]} threads against {one[3]}: max relative gradient difference {g1:.3g}, loss difference {l1:.3g}")
    ok = ok and one[3] == 1 and g1 == 0 and l1 == 0
g2, l2 = diff(one, blas2)
print(f"OpenBLAS on 2 threads against 1: max relative gradient difference {g2:.3g}, loss difference {l2:.3g}")
ok = ok and g2 < 1e-4 and l2 < 1e-5
print("PASSED" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
