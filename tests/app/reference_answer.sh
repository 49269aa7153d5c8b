#!/usr/bin/env bash
# The reference answer of a shipped deck (inputs/default.yaml: its expected loss
# per step, double on one rank): every layout and memory technique reproduces it
# and is VALID; the same deck with another seed and the old expected losses is
# INVALID (exit 3); data-parallel replicas (another batch) are not checked.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON, MPIEXEC.
source "$(dirname "$0")/common.sh"
deck=$MINILST_SOURCE/inputs/default.yaml
grep -q "^reference:" "$deck" || { echo "FAIL: $deck has no reference section"; exit 1; }
mpi=("${MPIEXEC:-mpiexec}" --oversubscribe)
run() {  # run NAME EXPECTED_EXIT CMD...
  local name=$1 want=$2 rc=0; shift 2
  "$@" --set run.steps=3 --set output.metrics="$name.h5" > "$name.log" 2>&1 || rc=$?
  echo "$name: exit $rc; $(grep -E '^reference:' "$name.log")"
  [[ $rc == "$want" ]] || { echo "FAIL: $name exited $rc, expected $want"; cat "$name.log"; exit 1; }
}
run ring2 0 "${mpi[@]}" -n 2 "$MINILST" run "$deck"
run offload 0 "$MINILST" run "$deck" --set parallel.ring=1 --set memory.policy=offload --set memory.offload_alpha=0.5
run ulysses_chunks 0 "${mpi[@]}" -n 2 "$MINILST" run "$deck" --set parallel.ring=1 --set parallel.ulysses=2 --set mst.mlp_chunks=3
run seed 3 "$MINILST" run "$deck" --set parallel.ring=1 --set run.seed=99
run replicas 0 "${mpi[@]}" -n 2 "$MINILST" run "$deck" --set parallel.ring=1
grep -q "reference: not checked: 2 data-parallel replicas" replicas.log || { echo "FAIL: replicas were checked"; exit 1; }
"$PYTHON" - <<'PY'
import sys, h5py
ok = True
for name, check in [("ring2", "PASSED"), ("offload", "PASSED"), ("ulysses_chunks", "PASSED"), ("seed", "FAILED"),
                    ("replicas", "none")]:
    f = h5py.File(f"{name}.h5", "r")
    got, valid = f.attrs["reference_check"], f.attrs["valid"]
    err = f.attrs.get("reference_max_rel_error", float("nan"))
    print(f"{name:15s} reference_check={got:7s} valid={valid} max rel error={err:.3g}")
    ok &= got == check and valid == ("FAILED" if check == "FAILED" else "PASSED")
    if check != "none":
        ok &= "reference/loss" in f and f.attrs["reference_rtol"] == 1e-5
sys.exit(0 if ok else 1)
PY
