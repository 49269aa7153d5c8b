#!/usr/bin/env bash
# minilst plan: its predictions are the memory runs measure, category by
# category, for every policy on 1 rank and for sequence-parallel layouts on 2
# and 4 ranks (the max over ranks); the step arena it predicts is the one a
# planned run allocates; --max-seq-len returns a length a run fits: planned then
# run at the answer (1 and 2 ranks, four policies, a device budget less a
# reserve), the run's measured device high-water and what its planned run holds
# (the buffers outside the step plus the arena) are within the budget, and S + 1
# does not fit; the device presets (--device, --device list) and the reserve; a length
# without a device budget says so; bad requests exit 2 naming the flag.
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
# plan --max-seq-len, then a run at the answer: fit NAME NP DECK -- SETTINGS... -- BUDGET FLAGS...
fit() {
  local name=$1 np=$2 deck_file=$3 sets=() budget=()
  shift 4
  while (($#)) && [[ $1 != -- ]]; do sets+=("$1"); shift; done
  shift
  budget=("$@")
  "$MINILST" plan "$deck_file" --ranks "$np" "${sets[@]}" --max-seq-len "${budget[@]}" --format json > "$name.fit.json"
  local S
  S=$("$PYTHON" -c "import json, sys; print(json.load(open(sys.argv[1]))['seq_len'])" "$name.fit.json")
  "$MINILST" plan "$deck_file" --ranks "$np" "${sets[@]}" --set run.seq_len=$((S + 1)) "${budget[@]}" --format json \
    > "$name.next.json"
  local launch=()
  [[ $np -eq 1 ]] || launch=("${MPIEXEC:-mpiexec}" -n "$np" --oversubscribe)
  "${launch[@]}" "$MINILST" run "$deck_file" "${sets[@]}" --set run.seq_len="$S" --set reference.losses= \
    --set output.metrics="$tmp/$name.h5" > "$name.log" || { cat "$name.log"; exit 1; }
  "$PYTHON" - "$name" "$name.fit.json" "$name.next.json" "$tmp/$name.h5" <<'PY'
import json, sys, h5py, numpy as np
name, plan, nxt, f = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), h5py.File(sys.argv[4], "r")
MiB = 2**20
budget = plan["device_budget_mib"] * MiB
total = f["memory/device_total"][:].astype(np.int64)
arena, bound = (f[f"memory/plan/{k}"][:].reshape(-1).astype(np.int64) for k in ("arena_bytes", "lower_bound_bytes"))
held = total - bound + arena  # per rank: the buffers outside the step + the arena (what a planned run holds)
bad = []
if not (budget > 0 and plan["reserve_mib"] > 0 and budget == (plan["device"]["capacity_mib"] - plan["reserve_mib"]) * MiB):
    bad.append(f"budget {budget} is not the device less the reserve")
if not plan["fits"] or plan["device_planned_bytes"] > budget: bad.append("the answer's plan does not fit")
if nxt["fits"]: bad.append(f"S + 1 = {nxt['seq_len']} fits too")
if total.max() != plan["memory_bytes"]["device_total"]: bad.append(f"device_total {total.max()} != plan")
if total.max() > budget: bad.append(f"measured device_total {total.max()} > budget {budget:.0f}")
if held.max() > budget: bad.append(f"the run's arena + outside buffers {held.max()} > budget {budget:.0f}")
if held.max() > plan["device_planned_bytes"]: bad.append(f"the run holds {held.max()} > planned {plan['device_planned_bytes']}")
print(f"{'ok  ' if not bad else 'FAIL'} {name}: S = {plan['seq_len']} on {plan['ranks']} rank(s), {plan['policy']}: budget "
      f"{budget / MiB:.4f} MiB ({plan['device']['capacity_mib']:g} less {plan['reserve_mib']:g}); run: device_total "
      f"{total.max() / MiB:.4f} MiB, arena {arena.max() / MiB:.4f} MiB = {arena.max() / bound.max():.3f} x bound, holds "
      f"{held.max() / MiB:.4f} MiB; planned {plan['device_planned_bytes'] / MiB:.4f} MiB; S + 1 plans "
      f"{nxt['device_planned_bytes'] / MiB:.4f} MiB {'; '.join(bad)}")
sys.exit(1 if bad else 0)
PY
}
tiny="$MINILST_SOURCE/inputs/tiny.yaml"
cpu="$MINILST_SOURCE/inputs/max_seq_cpu.yaml"
fit np1_full 1 "$tiny" -- --set memory.policy=full --set run.steps=2 -- --device-mib 3
fit np1_offload 1 "$tiny" -- --set memory.policy=offload --set run.steps=3 -- --device-mib 3 --reserve-mib 0.25
fit np2_ring_checkpoint 2 "$tiny" -- --set memory.policy=checkpoint --set parallel.ring=2 --set run.steps=2 \
  -- --device-mib 2 --reserve-mib 0.125
fit np2_ulysses_ckpt_offload 2 "$cpu" -- --set memory.policy=checkpoint_offload --set parallel.ulysses=2 \
  --set parallel.zero=3 --set memory.optimizer_offload=true --set run.steps=2 -- --device-mib 24

# The presets: capacities as the drivers report them, the default reserve, the JSON answer.
"$MINILST" plan --device list > devices.txt
grep -Eq "^  h100-80gb +81559 " devices.txt || { echo "FAIL: --device list"; cat devices.txt; exit 1; }
"$MINILST" plan --device list --format json > devices.json
"$MINILST" plan "$MINILST_SOURCE/inputs/llama3_8b.yaml" --ranks 8 --max-seq-len --device h100-80gb --format json \
  > h100.json
"$MINILST" plan "$MINILST_SOURCE/inputs/llama3_8b.yaml" --ranks 8 --max-seq-len --device gh200 --format json > gh200.json
"$PYTHON" - <<'PY'
import json
devices = {d["name"]: d for d in json.load(open("devices.json"))["devices"]}
assert devices["h100-80gb"]["capacity_mib"] == 81559 and devices["a100-80gb"]["capacity_mib"] == 81920, devices
for d in devices.values(): assert d["source"] and d["capacity_mib"] > 0, d
h = json.load(open("h100.json"))
assert h["device"] == {"name": "h100-80gb", "label": devices["h100-80gb"]["label"], "capacity_mib": 81559}, h["device"]
assert h["reserve_mib"] == 4096 and h["device_budget_mib"] == 81559 - 4096, h
assert h["fits"] and h["device_planned_bytes"] <= 77463 * 2**20, h
assert h["device_planned_bytes"] == h["device_outside_arena_bytes"] + h["arena_bytes"], h
assert h["arena_bytes"] >= h["arena_lower_bound_bytes"] > 0, h
g = json.load(open("gh200.json"))
assert g["host_budget_mib"] == devices["gh200"]["host_mib"] > 0 and g["device"]["capacity_mib"] == 97871, g
print(f"ok   presets: {len(devices)} devices; Llama-3-8B on 8 x h100-80gb: S = {h['seq_len']}, planned "
      f"{h['device_planned_bytes'] / 2**20:.0f} of {h['device_budget_mib']:g} MiB; on 8 x gh200: S = {g['seq_len']}")
PY
expect2() {  # expect2 REGEX ARGS...: plan exits 2 naming the problem
  local rc=0
  "$MINILST" plan "$deck" "${@:2}" > bad.log 2>&1 || rc=$?
  [[ $rc -eq 2 ]] && grep -Eq "$1" bad.log || { echo "FAIL: plan ${*:2} -> exit $rc"; cat bad.log; exit 1; }
  echo "ok: $(head -1 bad.log)"
}
expect2 "world size \(3 ranks\) is not a multiple" --ranks 3 --set parallel.ring=2
expect2 "not even S = 2 fits" --device-mib 0.01 --max-seq-len
expect2 "needs a budget" --max-seq-len
expect2 "^--device: unknown device 'h100'" --device h100 --max-seq-len
expect2 "^--reserve-mib: a reserve of 90000 MiB leaves nothing" --device h100-80gb --reserve-mib 90000 --max-seq-len
expect2 "^--reserve-mib: expected a number of MiB in \[0, 2\^40\]" --device a100-40gb --reserve-mib -1
expect2 "^--reserve-mib: a reserve is kept off a device" --reserve-mib 100 --host-mib 100 --max-seq-len
expect2 "^--device excludes --device-mib" --device h200 --device-mib 1000 --max-seq-len
# A length bounded by the activations alone says that the device was not bounded, and what it needs.
"$MINILST" plan "$deck" --max-seq-len --activation-mib 8 > unbounded.txt 2> unbounded.err
grep -Eq "^note: plan: no device budget .* needs [0-9.]+ MiB of device memory per rank" unbounded.err ||
  { cat unbounded.err; echo "FAIL: --max-seq-len without a device budget said nothing of it"; exit 1; }
"$MINILST" plan "$deck" --max-seq-len --device-mib 64 > bounded.txt 2> bounded.err
if grep -q "no device budget" bounded.err; then echo "FAIL: a device budget called unbounded"; exit 1; fi
echo "ok: $(head -1 unbounded.err)"
echo "plan checks passed"
