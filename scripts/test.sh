#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a tested build: installs what is
# missing, builds, runs every test with ctest (unit, reference, app checks).
#   scripts/test.sh [ctest arguments, e.g. -L reference or -R deck]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
source "$root/scripts/env.sh"
cd "$root/build"
ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@"
