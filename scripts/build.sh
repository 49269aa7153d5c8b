#!/usr/bin/env bash
# Configures and builds miniLST (Release) into ${BUILD_DIR:-build}.
# Extra arguments go to CMake, e.g. -DKokkos_ROOT=/path/to/kokkos-4 (see README).
#   KOKKOS_PREFIX=dir   a Kokkos + Kokkos Kernels install (scripts/build_kokkos.sh prints it):
#                       KOKKOS_PREFIX=... BUILD_DIR=build-omp scripts/build.sh
# With a CUDA Kokkos, the CUDA toolkit's bin/ goes on PATH (CUDA_HOME or /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
mkdir -p "$(dirname "$build")"
prefix=()
if [[ -n ${KOKKOS_PREFIX:-} ]]; then
  # -U: a build folder configured against another prefix must not keep finding that one (CMake caches *_DIR).
  prefix=(-DKokkos_ROOT="$KOKKOS_PREFIX" -DKokkosKernels_ROOT="$KOKKOS_PREFIX" -UKokkos_DIR -UKokkosKernels_DIR)
  if [[ -x $KOKKOS_PREFIX/bin/nvcc_wrapper ]]; then export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH; fi
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "${prefix[@]}" "$@" > "$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
grep "miniLST " "$build.configure.log" | sed 's/^-- //'
cmake --build "$build" -j "$(nproc)"
