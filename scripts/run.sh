#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a result: installs what is
# missing, builds, runs a deck (default: inputs/default.yaml) in runs/, prints
# the summary and the metrics file's path.
#   scripts/run.sh [DECK] [--set section.key=value ...]
#   NP=2 scripts/run.sh ...        run on 2 MPI ranks (mpiexec)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
source "$root/scripts/env.sh"

deck="$root/inputs/default.yaml"
if [[ $# -gt 0 && $1 != --* ]]; then deck=$(realpath "$1"); shift; fi
mkdir -p "$root/runs"
cd "$root/runs"
launcher=()
if [[ ${NP:-1} -gt 1 ]]; then launcher=(mpiexec -n "$NP" --oversubscribe); fi
log=$(mktemp)
set +e
"${launcher[@]}" "$root/build/minilst" run "$deck" "$@" | tee "$log"
rc=${PIPESTATUS[0]}
set -e
metrics=$(sed -n 's/^RESULT: .* metrics=\(.*\)$/\1/p' "$log")
rm -f "$log"
if [[ -n $metrics ]]; then
  echo "metrics file: $root/runs/$metrics"
  echo "summarize:    /usr/bin/python3 $root/analysis/summarize.py $root/runs/$metrics"
fi
exit "$rc"
