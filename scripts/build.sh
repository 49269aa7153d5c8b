#!/usr/bin/env bash
# Configures and builds miniLST (Release) into ${BUILD_DIR:-build}.
# Extra arguments go to CMake, e.g. -DKokkos_ROOT=/path/to/kokkos-4 (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "$@" > "$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
grep "miniLST " "$build.configure.log" | sed 's/^-- //'
cmake --build "$build" -j "$(nproc)"
