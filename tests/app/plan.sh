#!/usr/bin/env bash
# minilst plan: its predictions are the memory a run measures (every policy, one
# rank), and --max-seq-len returns the longest S whose prediction fits the budget
# (S fits, S + 1 does not). Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
deck="$MINILST_SOURCE/inputs/tiny.yaml"
for policy in full checkpoint checkpoint_offload "offload --set memory.offload_alpha=0.37"; do
  name=${policy%% *}
  set -- --set model.layers=4 --set run.steps=2 --set memory.policy=$policy
  "$MINILST" plan "$deck" "$@" --format json > "$name.json"
  "$MINILST" run "$deck" "$@" --set output.metrics="$tmp/$name.h5" > "$name.log" || { cat "$name.log"; exit 1; }
  "$PYTHON" - "$name.json" "$tmp/$name.h5" <<'PY'
import json, sys, h5py
plan, f = json.load(open(sys.argv[1])), h5py.File(sys.argv[2], "r")
bad = [c for c, v in plan["memory_bytes"].items() if int(f["memory"][c][0]) != v]
print(f"{sys.argv[1]}: plan == measured for {len(plan['memory_bytes'])} categories" if not bad else f"FAIL: {bad}")
sys.exit(1 if bad else 0)
PY
done
for policy in full offload; do
  "$MINILST" plan "$deck" --set memory.policy=$policy --device-mib 3 --max-seq-len --format json > longest.json
  S=$("$PYTHON" -c "import json; print(json.load(open('longest.json'))['seq_len'])")
  for s in "$S" $((S + 1)); do
    "$MINILST" plan "$deck" --set memory.policy=$policy --set run.seq_len=$s --format json > at.json
    "$PYTHON" -c "import json,sys; m=json.load(open('at.json'))['memory_bytes']['device_total']; \
print(f'$policy S=$s: device_total {m/2**20:.4f} MiB'); sys.exit(0 if (m <= 3*2**20) == ($s == $S) else 1)"
  done
done
rc=0; "$MINILST" plan "$deck" --set parallel.ring=2 > ring.log 2>&1 || rc=$?
[[ $rc -eq 2 ]] && grep -q "sequence parallelism" ring.log || { echo "FAIL: plan with a ring: exit $rc"; cat ring.log; exit 1; }
echo "plan checks passed"
