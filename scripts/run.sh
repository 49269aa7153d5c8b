#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a result: installs what is
# missing, builds, runs a deck (default: inputs/default.yaml) in runs/, prints
# the summary and the metrics file's path.
#   scripts/run.sh [DECK] [--set section.key=value ...]
#   NP=4 scripts/run.sh ...        the number of MPI ranks (default 2, as the default deck's ring needs)
#   LAUNCH="srun -n" NP=8 ...      another launcher (default: mpiexec --oversubscribe [--bind-to none] -n)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
source "$root/scripts/env.sh"

deck="$root/inputs/default.yaml"
if [[ $# -gt 0 && $1 != --* ]]; then deck=$(realpath "$1"); shift; fi
mkdir -p "$root/runs"
cd "$root/runs"
read -r -a launcher <<< "${LAUNCH:-$MINILST_LAUNCH}"
launcher+=("${NP:-2}")
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
