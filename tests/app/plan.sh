#!/usr/bin/env bash
# minilst plan: its predictions are the memory runs measure, category by
# category, for every policy on 1 rank and for sequence-parallel layouts on 2
# and 4 ranks (the max over ranks); --max-seq-len returns the longest S whose
# prediction fits the budget (S fits, S + 1 does not); the step arena it predicts
# is the one a planned run allocates; bad requests exit 2 with the reason.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON, MPIEXEC.
source "$(dirname "$0")/common.sh"
deck="$MINILST_SOURCE/inputs/tiny.yaml"
check() {  # check NAME NP -- SETTINGS...: plan and run NAME on NP ranks with the settings
  local name=$1 np=$2; shift 3
  "$MINILST" plan "$deck" --ranks "$np" "$@" --format json > "$name.plan.json"
  local launch=()
  [[ $np -eq 1 ]] || launch=("${MPIEXEC:-mpiexec}" -n "$np" --oversubscribe)
  "${launch[@]}" "$MINILST" run "$deck" "$@" --set output.metrics="$tmp/$name.h5" > "$name.log" \
    || { cat "$name.log"; exit 1; }
  "$PYTHON" - "$name.plan.json" "$tmp/$name.h5" <<'PY'
import json, sys, h5py
plan, f = json.load(open(sys.argv[1])), h5py.File(sys.argv[2], "r")
bad = [c for c, v in plan["memory_bytes"].items() if int(f["memory"][c][:].max()) != v]
bad += [c for c, v in plan["memory_bytes_min"].items() if int(f["memory"][c][:].min()) != v]
arena = int(f["memory"]["plan"]["arena_bytes"][:].max())
if plan["arena_bytes"] != arena: bad.append(f"arena {plan['arena_bytes']} != {arena}")
print(f"{sys.argv[1]}: plan == measured for {len(plan['memory_bytes'])} categories (max and min over ranks), "
      f"arena {arena} B" if not bad else f"FAIL {sys.argv[1]}: {bad}")
sys.exit(1 if bad else 0)
PY
}
common=(--set model.layers=4 --set run.steps=2)
for policy in full checkpoint hf_checkpoint checkpoint_offload vanilla "offload --set memory.offload_alpha=0.37"; do
  check "np1_${policy%% *}" 1 -- "${common[@]}" --set memory.policy=$policy
done
check ring2 2 -- "${common[@]}" --set parallel.ring=2 --set mst.mlp_chunks=3
check ring2_rsa 2 -- "${common[@]}" --set parallel.ring=2 --set parallel.ring_variant=rsa --set memory.policy=checkpoint
check ulysses2_offload 2 -- "${common[@]}" --set parallel.ulysses=2 --set memory.policy=offload --set memory.offload_alpha=0.37
check hybrid4 4 -- "${common[@]}" --set parallel.ulysses=2 --set parallel.ring=2 --set memory.policy=checkpoint_offload
check dp2 2 -- "${common[@]}" --set run.grad_accum=2
for policy in full offload; do
  "$MINILST" plan "$deck" --set memory.policy=$policy --device-mib 3 --max-seq-len --format json > longest.json
  S=$("$PYTHON" -c "import json; print(json.load(open('longest.json'))['seq_len'])")
  for s in "$S" $((S + 1)); do
    "$MINILST" plan "$deck" --set memory.policy=$policy --set run.seq_len=$s --format json > at.json
    "$PYTHON" -c "import json,sys; m=json.load(open('at.json'))['memory_bytes']['device_total']; \
print(f'$policy S=$s: device_total {m/2**20:.4f} MiB'); sys.exit(0 if (m <= 3*2**20) == ($s == $S) else 1)"
  done
done
expect2() {  # expect2 REGEX ARGS...: plan exits 2 naming the problem
  local rc=0
  "$MINILST" plan "$deck" "${@:2}" > bad.log 2>&1 || rc=$?
  [[ $rc -eq 2 ]] && grep -Eq "$1" bad.log || { echo "FAIL: plan ${*:2} -> exit $rc"; cat bad.log; exit 1; }
  echo "ok: $(head -1 bad.log)"
}
expect2 "world size \(3 ranks\) is not a multiple" --ranks 3 --set parallel.ring=2
expect2 "not even S = 2 fits" --device-mib 0.01 --max-seq-len
expect2 "needs a budget" --max-seq-len
echo "plan checks passed"
