#!/usr/bin/env bash
# memory.planner end to end, from the metrics file: on 1 rank and on a 2-rank
# ring, for full, checkpoint and offload, every step after the first allocates
# nothing, the arena is within 5% of the lower bound, and the losses equal those
# of per-buffer allocation (planner none); the exact solver runs too.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON, MPIEXEC.
source "$(dirname "$0")/common.sh"
deck="$MINILST_SOURCE/inputs/tiny.yaml"
common=(--set model.layers=4 --set run.steps=4 --set mst.mlp_chunks=3)
files=()
for np in 1 2; do
  launch=()
  ring=()
  if [[ $np -gt 1 ]]; then launch=("${MPIEXEC:-mpiexec}" -n "$np" --oversubscribe); ring=(--set parallel.ring=2); fi
  for policy in full checkpoint "offload --set memory.offload_alpha=0.37"; do
    name=np${np}_${policy%% *}
    for planner in plan none; do
      "${launch[@]}" "$MINILST" run "$deck" "${common[@]}" "${ring[@]}" --set memory.policy=$policy \
        --set memory.planner=$planner --set output.metrics="$tmp/${name}_$planner.h5" > "${name}_$planner.log" \
        || { cat "${name}_$planner.log"; exit 1; }
    done
    grep "memory plan:" "${name}_plan.log"
    files+=("$tmp/${name}_plan.h5" "$tmp/${name}_none.h5")
  done
done
"$MINILST" run "$deck" "${common[@]}" --set memory.planner_solver=exact --set output.metrics="$tmp/exact_plan.h5" \
  > exact.log || { cat exact.log; exit 1; }
"$MINILST" run "$deck" "${common[@]}" --set memory.planner=none --set output.metrics="$tmp/exact_none.h5" > none.log
files+=("$tmp/exact_plan.h5" "$tmp/exact_none.h5")
"$PYTHON" - "${files[@]}" <<'PY'
import sys, h5py, numpy as np
bad = 0
for planned, plain in zip(sys.argv[1::2], sys.argv[2::2]):
    p, n = h5py.File(planned, "r"), h5py.File(plain, "r")
    allocs = p["memory/plan/allocations_per_step"][:]
    arena, bound = p["memory/plan/arena_bytes"][:], p["memory/plan/lower_bound_bytes"][:]
    ok = (np.all(allocs[1:] == 0) and np.all(allocs[0] > 0) and np.all(arena <= 1.05 * bound)
          and np.allclose(p["loss"][:], n["loss"][:], rtol=1e-12, atol=0)
          and np.all(n["memory/plan/allocations_per_step"][1:] > 0))
    print(f"{'ok  ' if ok else 'FAIL'} {planned.split('/')[-1]}: allocations per step {allocs[:, 0].tolist()}, arena "
          f"{arena.max()} B = {arena.max() / bound.max():.3f} x bound, {p.attrs['plan_method']}, "
          f"solver {p.attrs['planner_solver']}, losses equal to planner none")
    bad += not ok
sys.exit(1 if bad else 0)
PY
