#!/usr/bin/env bash
# memory.policy offload and checkpoint_offload end to end (check_offload.py):
# the same losses as full, the metrics the offload adds (/offload/bytes_*, the
# offload_wait / prefetch_wait / copy_engine_busy phases, the offload_*
# attributes), bytes moved per step equal to what the policy must move, host and
# device high-water equal to the analytic model; alpha auto under a bandwidth
# cap; offload with mini-sequences (alpha 1, 3 MLP chunks: the MLP's tensors neither
# kept nor moved). Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
common=(--set model.layers=5 --set run.steps=3 --set run.warmup_steps=1)
run() {  # run NAME --set ...: one run into NAME.h5
  local name=$1; shift
  "$MINILST" run "$MINILST_SOURCE/inputs/tiny.yaml" "${common[@]}" "$@" --set output.metrics="$tmp/$name.h5" \
    > "$name.log" || { cat "$name.log"; exit 1; }
  grep -q "^RESULT: VALID FOM=" "$name.log" || { cat "$name.log"; exit 1; }
}
run full --set memory.policy=full
run offload --set memory.policy=offload --set memory.offload_alpha=0.37
run checkpoint_offload --set memory.policy=checkpoint_offload
run auto --set memory.policy=offload --set memory.offload_bandwidth_gbs=0.05
run chunked --set memory.policy=offload --set memory.offload_alpha=1 --set mst.mlp_chunks=3
grep "^offload: alpha = " auto.log
"$PYTHON" "$MINILST_SOURCE/tests/app/check_offload.py" "$tmp/full.h5" "$tmp/offload.h5" "$tmp/checkpoint_offload.h5" \
  "$tmp/auto.h5" "$tmp/chunked.h5"
