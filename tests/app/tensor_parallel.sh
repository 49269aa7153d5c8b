#!/usr/bin/env bash
# Tensor parallelism end to end on 8 ranks (tests/CMakeLists.txt): `minilst verify` certifies the
# tiny deck on TP 2 x Ulysses 2 x ring 2 (with and without MEMO's offload) and on TP 2 x ring 2 x
# data parallel 2 with ZeRO-3, optimizer offload, checkpoint offload and packed documents (and the
# latter in bf16 within its tolerance); a run's metrics carry the tensor-parallel operations and phase; shapes that cannot
# split are refused on every rank before any work; `minilst plan` of the 70B deck on 64 ranks with
# a machine file answers within a minute, with tensor-parallel layouts among those it ranks.
source "$(dirname "$0")/common.sh"
mpi=("${MPIEXEC:-mpiexec}" -n 8 --oversubscribe)
deck="$MINILST_SOURCE/inputs/tiny.yaml"
tiny=(--set model.vocab=64 --set run.seq_len=48 --set "run.documents=7 1 13 5")

certify() {  # certify NAME PRECISION LAYOUT-ARGS...: PASSED, its layout in the RESULT line
  local name=$1 precision=$2; shift 2
  rc=0; "${mpi[@]}" "$MINILST" verify "$deck" "${tiny[@]}" --set run.precision="$precision" "$@" \
    --set output.metrics="$tmp/$name.h5" > "$name.log" 2>&1 || rc=$?
  grep -E "^RESULT: verify PASSED certified=yes layout=[^ ]*:T2x" "$name.log" ||
    { cat "$name.log"; echo "FAIL: $name not certified (exit $rc)"; exit 1; }
}
certify hybrid double --set parallel.tensor=2 --set parallel.ulysses=2 --set parallel.ring=2
ring_dp=(--set parallel.tensor=2 --set parallel.ring=2 --set parallel.zero=3 --set memory.optimizer_offload=true
         --set memory.policy=checkpoint_offload)
certify ring_dp double "${ring_dp[@]}"
certify ring_dp_bf16 bf16 "${ring_dp[@]}"
# MEMO's offload: half the rows' segments to host, the rest recomputed by the group; the MLP's kept
certify offload double --set parallel.tensor=2 --set parallel.ulysses=2 --set parallel.ring=2 \
  --set memory.policy=offload --set memory.offload_alpha=0.5 --set mst.mlp_chunks=1 --set model.layers=3

# A run: the step's tensor-parallel bytes and phase are in its metrics.
"${mpi[@]}" "$MINILST" run "$deck" "${tiny[@]}" --set parallel.tensor=4 --set parallel.ring=2 \
  --set memory.policy=offload --set run.steps=2 --set output.metrics="$tmp/run.h5" > run.log 2>&1 || { cat run.log; echo "FAIL: run"; exit 1; }
"$PYTHON" - "$tmp/run.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    for op in ("tp_allgather", "tp_reduce_scatter", "tp_grad_sum"):
        assert f[f"comm/{op}/bytes"][:].min() > 0, op
    assert "tensor_comm" in f["timings"], list(f["timings"])
print("run: tp_allgather, tp_reduce_scatter, tp_grad_sum and tensor_comm recorded")
PY

# Refused on every rank, exit 2, before any work, naming the keys.
refused() {  # refused NAME MESSAGE ARGS...
  local name=$1 message=$2; shift 2
  rc=0; timeout 60 "${mpi[@]}" "$MINILST" run "$deck" "${tiny[@]}" "$@" --set output.metrics="$tmp/$name.h5" \
    > "$name.log" 2>&1 || rc=$?
  [[ $rc -ne 0 && $rc -ne 124 ]] || { cat "$name.log"; echo "FAIL: $name exit $rc"; exit 1; }
  grep -qF "$message" "$name.log" || { cat "$name.log"; echo "FAIL: $name: no '$message'"; exit 1; }
  [[ ! -e "$tmp/$name.h5" ]] || { echo "FAIL: $name wrote its metrics"; exit 1; }
}
refused heads "model.heads (4) is not divisible by parallel.tensor (8)" --set parallel.tensor=8
refused vocab "model.vocab (61) is not divisible by parallel.tensor (2)" --set parallel.tensor=2 --set model.vocab=61

# The 70B deck's layout search on 64 H100s: within a minute, tensor-parallel layouts ranked.
start=$SECONDS
"$MINILST" plan "$MINILST_SOURCE/inputs/llama3_70b.yaml" --ranks 64 --max-seq-len --device h100-80gb \
  --machine "$MINILST_SOURCE/machines/h100-sxm-8gpu-ib400.yaml" > plan70b.log 2>&1 ||
  { cat plan70b.log; echo "FAIL: plan of the 70B deck"; exit 1; }
(( SECONDS - start < 60 )) || { echo "FAIL: the 70B plan took $((SECONDS - start)) s"; exit 1; }
grep -E "T[248] U" plan70b.log || { cat plan70b.log; echo "FAIL: no tensor-parallel layout ranked"; exit 1; }
echo "70B plan in $((SECONDS - start)) s"
