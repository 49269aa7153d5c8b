#!/usr/bin/env bash
# ZeRO end to end on 3 ranks (shards that divide nothing): every stage, with and
# without optimizer offload, on a data-parallel x Ulysses... layout of the tiny deck
# (double, 3 AdamW steps): the loss curve equals stage 0's to 1e-12; every step's
# bytes per operation equal the analytic model; every memory category (host_optimizer
# included) equals the model; the new timers are in the file. Then the refusals:
# a stage on one rank, and a host budget too small for the offloaded states, each
# before any work (exit 2, a message naming the key, no metrics file).
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON, MPIEXEC.
source "$(dirname "$0")/common.sh"
args=(run "$MINILST_SOURCE/inputs/tiny.yaml" --set run.steps=3 --set run.learning_rate=1e-2
      --set parallel.ring=3 --set parallel.ring_layout=contiguous)
for stage in 0 1 2 3; do
  for off in false true; do
    "${MPIEXEC:-mpiexec}" -n 3 --oversubscribe "$MINILST" "${args[@]}" --set parallel.zero=$stage \
      --set memory.optimizer_offload=$off --set output.metrics=z${stage}_$off.h5 > z${stage}_$off.log \
      || { cat z${stage}_$off.log; exit 1; }
  done
done
grep -h "^model states" z3_true.log
"$PYTHON" - <<'PY'
import h5py, numpy as np, sys
fails = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: fails.append(what)
base = h5py.File("z0_false.h5")["loss"][:]
for stage in range(4):
    for off in ("false", "true"):
        name = f"z{stage}_{off}.h5"
        f = h5py.File(name)
        loss = f["loss"][:]
        check(np.max(np.abs(loss - base) / np.abs(base)) <= 1e-12, f"{name}: loss curve {loss} = stage 0's")
        check(int(f.attrs["zero_stage"]) == stage and f.attrs["optimizer_offload"] == off, f"{name}: attributes")
        for op in f["comm"]:
            meas, model = f["comm"][op]["bytes"][:], f["comm"][op]["model_bytes"][:]
            check(np.all(meas == model[None, :]), f"{name}: {op} bytes per step {meas[0]} = model {model}")
        for c in f["memory"]:
            if c in ("model",) or not isinstance(f["memory"][c], h5py.Dataset): continue
            check(np.all(f["memory"][c][:] == f["memory"]["model"][c][:]), f"{name}: memory {c} = model")
        for p in ("grad_reduce", "param_gather", "grad_reduce_overlap", "param_gather_overlap"):
            check(p in f["timings"], f"{name}: timer {p}")
        if stage >= 2:
            check(f["comm"]["reduce_scatter"]["bytes"][0].min() > 0 and "allreduce" in f["comm"]
                  and f["comm"]["allreduce"]["bytes"][0].max() == 0, f"{name}: reduce-scatter instead of all-reduce")
        if off == "true":
            check(f["memory"]["host_optimizer"][0] > 0 and f["memory"]["optimizer"][0] == 0,
                  f"{name}: optimizer states in host memory")
# stage 3: the per-rank model states are a third of stage 0's plus the gathered units and buckets
w0 = sum(int(h5py.File("z0_false.h5")["memory"][c][0]) for c in ("weights", "gradients", "optimizer"))
w3 = sum(int(h5py.File("z3_false.h5")["memory"][c][0]) for c in ("weights", "gradients", "optimizer"))
check(w3 < w0, f"stage 3 model states {w3} B < stage 0's {w0} B")
sys.exit(1 if fails else 0)
PY
# Refused before any work: exit 2, the key named, no metrics file.
set +e
"$MINILST" run "$MINILST_SOURCE/inputs/tiny.yaml" --set parallel.zero=1 --set output.metrics=one.h5 > one.log 2>&1
rc=$?
set -e
cat one.log
[[ $rc -eq 2 ]] && grep -q "parallel.zero = 1" one.log && [[ ! -e one.h5 ]]
set +e
"${MPIEXEC:-mpiexec}" -n 2 --oversubscribe "$MINILST" run "$MINILST_SOURCE/inputs/tiny.yaml" --set parallel.zero=1 \
  --set memory.optimizer_offload=true --set memory.host_budget_mib=0.01 --set output.metrics=host.h5 > host.log 2>&1
rc=$?
set -e
grep error host.log
[[ $rc -eq 2 ]] && grep -q "memory.host_budget_mib" host.log && [[ ! -e host.h5 ]]
echo "zero: all checks passed"
