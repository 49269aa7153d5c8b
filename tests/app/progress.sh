#!/usr/bin/env bash
# Long commands say they are alive (core/progress.hpp): plan, probe and verify print a line on stderr
# every MINILST_PROGRESS_SECONDS (default 10 s) naming what they are doing and the elapsed time, and
# leave stdout (a plan's table or JSON) alone; a plan shorter than the period prints none.
#   plan:   Llama-3-70B's layout search on 64 ranks (about 4 s): "plan: layout search: layout i of n at S = ..."
#   verify: the default deck on 2 ranks: its layout's step, then the single-rank float64 reference
#   probe:  checked where app_procurement probes (tests/app/procurement.sh)
source "$(dirname "$0")/common.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAIL: $*"; exit 1; }
line='\(elapsed [0-9]+:[0-9]{2}:[0-9]{2}\)$'

MINILST_PROGRESS_SECONDS=0.25 "$MINILST" plan "$MINILST_SOURCE/inputs/llama3_70b.yaml" --ranks 64 --max-seq-len \
  --device h100-80gb --machine "$MINILST_SOURCE/machines/h100-sxm-8gpu-ib400.yaml" --format json > plan.json 2> plan.err \
  || { cat plan.err; fail "plan"; }
"$PYTHON" -c 'import json, sys; json.load(open(sys.argv[1]))' plan.json || fail "progress lines got into the plan's JSON"
(($(grep -Ec "^plan: layout search: layout [0-9]+ of [0-9]+ at S = [0-9]+ $line" plan.err) >= 3)) \
  || { cat plan.err; fail "fewer than 3 progress lines from a plan of several seconds"; }
"$MINILST" plan "$MINILST_SOURCE/inputs/tiny.yaml" --ranks 2 > short.txt 2> short.err || fail "a short plan"
[[ ! -s short.err ]] || { cat short.err; fail "a plan shorter than 10 s printed progress"; }

MINILST_PROGRESS_SECONDS=0.1 "${MPIEXEC:-mpiexec}" --oversubscribe -n 2 "$MINILST" verify "$MINILST_SOURCE/inputs/default.yaml" \
  --set output.metrics=v.h5 > verify.log 2> verify.err || { cat verify.log verify.err; fail "verify"; }
grep -Eq "^verify: the single-rank float64 reference step $line" verify.err || { cat verify.err; fail "verify: no progress line"; }
grep -q "^RESULT: verify PASSED" verify.log || fail "verify did not pass"

echo PASS
