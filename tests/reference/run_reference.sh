#!/usr/bin/env bash
# Runs the tiny deck (2 layers, GQA, S=37, d=40, V=61, double) with a tensor
# dump, then checks the loss and every gradient against the independent PyTorch
# float64 implementation (torch_reference.py), to 1e-8 relative.
# Extra arguments are passed to minilst (e.g. --set memory.policy=checkpoint).
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON; NP > 1 runs on
# NP MPI ranks through MPIEXEC; TOL and LOSS_TOL replace the tolerances (bf16:
# 5e-2 per gradient tensor, 5e-3 on the loss).
source "$(dirname "$0")/../app/common.sh"
launcher=()
if [[ ${NP:-1} -gt 1 ]]; then launcher=("${MPIEXEC:-mpiexec}" -n "$NP" --oversubscribe); fi
"${launcher[@]}" "$MINILST" run "$MINILST_SOURCE/inputs/tiny.yaml" --set output.dump="$tmp/dump.h5" \
  --set output.metrics="$tmp/metrics.h5" "$@" > "$tmp/run.log" || { cat "$tmp/run.log"; exit 1; }
grep '^RESULT:' "$tmp/run.log"
"$PYTHON" "$MINILST_SOURCE/tests/reference/torch_reference.py" "$tmp/dump.h5" --tol "${TOL:-1e-8}" \
  --loss-tol "${LOSS_TOL:-${TOL:-1e-8}}"
