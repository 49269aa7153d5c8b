# Sourced by the script tests: strict mode, the programs ctest passes in the
# environment (MINILST, MINILST_SOURCE, PYTHON), and a scratch directory that is
# the working directory and is removed on exit.
set -euo pipefail
: "${MINILST:?path of the minilst binary (set by ctest)}" "${MINILST_SOURCE:?source tree (set by ctest)}"
PYTHON=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
