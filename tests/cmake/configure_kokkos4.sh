#!/usr/bin/env bash
# The same CMake files must configure against Debian's Kokkos 3.4 (repaired) and
# a standalone Kokkos 4.x (used as is). This configures the project against a
# stand-in 4.x package (mock_kokkos4/), compiles the program's main and a source
# that calls Kokkos Kernels through that package's targets, checks that the
# program links the package's libraries, and that no repair was applied there.
# (The whole program against a real Kokkos 4.x is built and tested by the OpenMP
# stage of scripts/test.sh, in build-omp/.)
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
# two objects through the package's compile flags (make's per-source targets, Makefile generator)
(cd "$tmp" && make src/app/main.cpp.o src/model/trainer.cpp.o) > "$tmp/build.log" 2>&1 || { tail -30 "$tmp/build.log"; exit 1; }
link="$tmp/CMakeFiles/minilst.dir/link.txt"
for lib in trilinos_kokkoskernels trilinos_kokkoscore; do
  grep -q -- "-l$lib\|lib$lib" "$link" || { echo "FAIL: the program does not link the package's $lib"; cat "$link"; exit 1; }
done
grep "^Kokkos_DIR:" "$MINILST_BUILD/CMakeCache.txt"   # the main build: Debian's (repaired) package
echo "ok: configured against a Kokkos 4.x-style package with the same CMake files, compiled through its targets, linked to its libraries"
