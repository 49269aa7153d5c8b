#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a result: installs what is
# missing, builds, runs a deck (default: inputs/default.yaml) in runs/, prints
# the summary and the metrics file's path.
#   scripts/run.sh [DECK] [--set section.key=value ...]
#   NP=4 scripts/run.sh ...        the number of MPI ranks (default 2, as the default deck's ring needs)
#   LAUNCH="srun -n" NP=8 ...      another launcher (default: mpiexec --oversubscribe [--bind-to none] -n)
#   MINILST=path/to/minilst ...    run that program: no set-up, no build
#   RUNS_DIR=dir ...               run in dir (default: runs/ of the checkout)
# In an installed tree (PREFIX/share/minilst/scripts/run.sh) nothing is set up or
# built: it runs the installed PREFIX/bin/minilst (scripts/lib/minilst_program.sh)
# in ./runs (RUNS_DIR to put it elsewhere).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib/minilst_program.sh"
if minilst_checkout "$root" && [[ -z ${MINILST:-} ]]; then
  bash "$root/scripts/setup.sh"
  bash "$root/scripts/build.sh"
fi
source "$root/scripts/env.sh"
exe=$(minilst_program "$root") || exit 2

deck="$root/inputs/default.yaml"
if [[ $# -gt 0 && $1 != --* ]]; then deck=$(realpath "$1"); shift; fi
runs=$(minilst_runs_dir "$root")
mkdir -p "$runs"
runs=$(cd "$runs" && pwd)
cd "$runs"
read -r -a launcher <<< "${LAUNCH:-$MINILST_LAUNCH}"
launcher+=("${NP:-2}")
log=$(mktemp)
set +e
"${launcher[@]}" "$exe" run "$deck" "$@" | tee "$log"
rc=${PIPESTATUS[0]}
set -e
metrics=$(sed -n 's/^RESULT: .* metrics=\(.*\)$/\1/p' "$log")
rm -f "$log"
if [[ -n $metrics ]]; then
  [[ $metrics == /* ]] || metrics=$runs/$metrics
  echo "metrics file: $metrics"
  echo "summarize:    /usr/bin/python3 $root/analysis/summarize.py $metrics"
fi
exit "$rc"
