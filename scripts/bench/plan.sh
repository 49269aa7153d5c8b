#!/usr/bin/env bash
# The memory plan against per-buffer allocation: each deck run with
# memory.planner plan and none, alternating, several rounds; prints per deck the
# arena, the lower bound (the most bytes live at once), what per-buffer allocation
# held, the allocations per step, and the step time of both, and writes the table
# to runs/bench/plan_<UTC time>/plan_bench.h5.
#   scripts/bench/plan.sh [DECK ...] [--np N] [--rounds R] [--set k=v ...]
# Default: inputs/default.yaml on 2 ranks (its ring), 3 rounds.
# MINILST=path/to/minilst skips the set-up and the build.
source "$(dirname "$0")/common.sh"
decks=() np=2 rounds=3 extra=()
while (($#)); do
  case $1 in
    --np) np=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    *) decks+=("$(realpath "$1")"); shift ;;
  esac
done
((${#decks[@]})) || decks=("$root/inputs/default.yaml")
bench_dir plan
for deck in "${decks[@]}"; do
  name=$(basename "$deck" .yaml)
  for r in $(seq 1 "$rounds"); do
    for planner in plan none; do
      f="$out/${name}_${planner}_r$r.h5"
      "${launch[@]}" "$np" "$minilst" run "$deck" "${extra[@]}" --set memory.planner=$planner \
        --set output.metrics="$f" > "${f%.h5}.log" 2>&1 || { tail -20 "${f%.h5}.log"; exit 1; }
      echo "$name round $r, planner $planner: $(sed -n 's/^RESULT: \(.*\) metrics=.*/\1/p' "${f%.h5}.log")"
    done
  done
done
"$py" - "$out" <<'PY'
import glob, os, re, sys
import h5py, numpy as np
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*_r*.h5"))):
    name, planner, r = re.match(r"(.*)_(plan|none)_r(\d+)\.h5$", os.path.basename(path)).groups()
    f = h5py.File(path, "r")
    w = int(f.attrs["warmup_steps"])
    rows.setdefault(name, {}).setdefault(planner, []).append(
        (float(f["timings"]["step"][w:].max(axis=1).mean()), f))
MiB = 2.0 ** 20
with h5py.File(os.path.join(out, "plan_bench.h5"), "w") as h:
    for name, d in rows.items():
        plan_t = np.mean([t for t, _ in d["plan"]])
        none_t = np.mean([t for t, _ in d["none"]])
        f = d["plan"][0][1]
        arena, bound = f["memory/plan/arena_bytes"][:].max(), f["memory/plan/lower_bound_bytes"][:].max()
        held = f["memory/plan/unplanned_peak_bytes"][:].max()
        allocs = f["memory/plan/allocations_per_step"][:]
        allocs_none = d["none"][0][1]["memory/plan/allocations_per_step"][:]
        print(f"{name}: arena {arena / MiB:.2f} MiB = {arena / bound:.3f} x lower bound {bound / MiB:.2f} MiB "
              f"({f.attrs['plan_method']}); per-buffer allocation held {held / MiB:.2f} MiB; allocations per step "
              f"{allocs[0].max()} then {allocs[1:].max()} (none: {allocs_none[1:].max()}); step {plan_t:.4f} s with "
              f"the plan vs {none_t:.4f} s without ({plan_t / none_t:.3f}), {len(d['plan'])} rounds")
        g = h.create_group(name)
        for k, v in (("arena_bytes", arena), ("lower_bound_bytes", bound), ("unplanned_peak_bytes", held),
                     ("step_s_plan", plan_t), ("step_s_none", none_t)):
            g.attrs[k] = v
print(f"table: {os.path.join(out, 'plan_bench.h5')}")
PY
