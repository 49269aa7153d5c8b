#!/usr/bin/env bash
# Extra ranks are data parallel: rank r trains on the token streams r*A .. r*A+A-1
# and gradients are averaged, so 2 ranks x grad_accum 1 is the same computation
# as 1 rank x grad_accum 2. Their loss trajectories (3 AdamW steps) must agree
# to 1e-12 in double. Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON, MPIEXEC.
source "$(dirname "$0")/common.sh"
args=(run "$MINILST_SOURCE/inputs/tiny.yaml" --set run.steps=3 --set run.learning_rate=1e-2)
"${MPIEXEC:-mpiexec}" -n 2 --oversubscribe "$MINILST" "${args[@]}" --set output.metrics=np2.h5 > np2.log
"$MINILST" "${args[@]}" --set run.grad_accum=2 --set output.metrics=np1.h5 > np1.log
grep RESULT np2.log np1.log
"$PYTHON" - <<'PY'
import h5py, numpy as np, sys
a, b = h5py.File("np2.h5")["loss"][:], h5py.File("np1.h5")["loss"][:]
err = np.max(np.abs(a - b) / np.abs(b))
print(f"2 ranks: {a}\n1 rank, grad_accum 2: {b}\nmax rel diff {err:.2e}")
ok = err <= 1e-12 and h5py.File("np2.h5").attrs["jobsize"] == "2" and a[-1] < a[0]
sys.exit(0 if ok else 1)
PY
