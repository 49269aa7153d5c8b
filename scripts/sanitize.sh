#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer: a separate
# build in build-asan/ (Debian's Kokkos, -O1 -g), then ctest on it (every test but
# the build checks). Any sanitizer report fails the test that triggered it.
# Leak checking is off: MPI libraries keep their allocations until exit.
#   scripts/sanitize.sh [ctest arguments, e.g. -R deck]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo bash "$root/scripts/build.sh" -DMINILST_NATIVE=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
source "$root/scripts/env.sh"
cd "$root/build-asan" && ctest --output-on-failure --timeout 3000 -j "$(nproc)" -LE "build|cuda" "$@"
