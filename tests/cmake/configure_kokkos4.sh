#!/usr/bin/env bash
# The same CMake files must configure against Debian's Kokkos 3.4 (repaired) and
# a standalone Kokkos 4.x (used as is). This configures the project against a
# stand-in 4.x package (mock_kokkos4/) and builds the program, then checks that
# no repair was applied there.
# Environment (set by ctest): MINILST_SOURCE, MINILST_BUILD (the main build dir).
set -euo pipefail
: "${MINILST_SOURCE:?}" "${MINILST_BUILD:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mock="$MINILST_SOURCE/tests/cmake/mock_kokkos4"
cmake -S "$MINILST_SOURCE" -B "$tmp" -DKokkos_DIR="$mock" -DKokkosKernels_DIR="$mock" \
  -DMINILST_ENABLE_TESTS=OFF -DCMAKE_BUILD_TYPE=Release > "$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; exit 1; }
grep -q "Kokkos 4.3.0 (SERIAL,OPENMP)" "$tmp/configure.log" || { echo "FAIL: 4.x package not used"; cat "$tmp/configure.log"; exit 1; }
if grep -q "repaired\|-> trilinos_kokkoskernels" "$tmp/configure.log"; then
  echo "FAIL: a repair was applied to a correct Kokkos 4.x package"; exit 1
fi
cmake --build "$tmp" --target minilst -j 2 > "$tmp/build.log" 2>&1 || { tail -30 "$tmp/build.log"; exit 1; }
"$tmp/minilst" --version
grep "^Kokkos_DIR:" "$MINILST_BUILD/CMakeCache.txt"   # the main build: Debian's (repaired) package
echo "ok: configured and built against a Kokkos 4.x-style package with the same CMake files"
