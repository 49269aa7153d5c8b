#!/usr/bin/env bash
# Runs a 4-layer double deck with memory.policy=full and =checkpoint and checks
# the metrics files (check_metrics.py): the schema, provenance, units and
# per-rank statistics are there, the two policies give the same losses, and
# checkpoint's activation high-water is the lower one and matches the analytic
# model; the RESULT line (with MFU) is the one `minilst result` rebuilds from the file. Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
common=(--set model.layers=4 --set run.steps=3 --set run.warmup_steps=1)
for policy in full checkpoint; do
  "$MINILST" run "$MINILST_SOURCE/inputs/tiny.yaml" "${common[@]}" --set memory.policy=$policy \
    --set output.metrics="$tmp/$policy.h5" > "$policy.log"
  grep -q "^RESULT: VALID FOM=.* MFU=[0-9.]* tier=.* reportable=.* metrics=" "$policy.log" || { cat "$policy.log"; exit 1; }
  # `minilst result` rebuilds the same line from the file
  [[ "$("$MINILST" result "$tmp/$policy.h5")" == "$(grep '^RESULT:' "$policy.log")" ]] ||
    { echo "FAIL: minilst result differs from the run's RESULT line"; "$MINILST" result "$tmp/$policy.h5"; exit 1; }
done
"$PYTHON" "$MINILST_SOURCE/tests/app/check_metrics.py" "$tmp/full.h5" "$tmp/checkpoint.h5"
