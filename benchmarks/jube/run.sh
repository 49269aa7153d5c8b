#!/usr/bin/env bash
# Runs the JUBE benchmark (minilst.yaml) into OUT and prints its result table; exits 1 unless every
# workpackage finished and every run's check passed (verdict VALID, FOM within its tolerance of this
# system's reference), 2 on a usage error. JUBE itself exits 0 whatever its steps did.
#   benchmarks/jube/run.sh OUT [jube run options, e.g. --tag local]
# The environment chooses decks, points and the system (minilst.yaml's header).
set -uo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 OUT [jube run options]" >&2; exit 2; }
command -v jube > /dev/null || { echo "$0: no jube on PATH (Debian: apt-get install jube; pip install JUBE)" >&2; exit 2; }
out=$1
shift
spec=$(dirname "$0")/minilst.yaml
jube run "$spec" -o "$out" --hide-animation "$@" > "$out.run.log" 2>&1 || { cat "$out.run.log"; exit 1; }
table=$(jube result "$out" -a -i last 2>&1)
echo "$table"
status=$(jube status "$out" -i last 2>&1)
[[ $status == FINISHED ]] || { echo "FAIL: the benchmark is $status (jube info $out -i last; jube log $out)"; exit 1; }
# One row per run; its check column says PASS (the check step also errs on FAIL, which makes status ERROR).
rows=$(grep -cE '^\|.*\| +(PASS|FAIL) +\|' <<< "$table")
passed=$(grep -cE '^\|.*\| +PASS +\|' <<< "$table")
[[ $rows -gt 0 && $rows == "$passed" ]] || { echo "FAIL: $passed of $rows run(s) passed their check"; exit 1; }
echo "PASS: every check of $rows run(s) passed"
