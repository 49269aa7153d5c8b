# Sourced by the benchmark scripts: strict mode, the repository root, set-up and
# build (skipped when MINILST=path/to/minilst or MINILST_BIN_DIR=dir names a
# build), the run-time environment, and where the programs are: $minilst, $bin, $py.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ -z ${MINILST:-}${MINILST_BIN_DIR:-} ]]; then
  bash "$root/scripts/setup.sh"
  bash "$root/scripts/build.sh" > /dev/null
fi
source "$root/scripts/env.sh"
source "$root/scripts/lib/unique_dir.sh"
bin=${MINILST_BIN_DIR:-$(dirname "${MINILST:-$root/build/minilst}")}
minilst=${MINILST:-$bin/minilst}
py=/usr/bin/python3
