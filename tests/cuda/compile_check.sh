#!/usr/bin/env bash
# Compiles the CUDA copy engine where no GPU is: builds (or finds cached) Kokkos
# with CUDA (scripts/build_kokkos.sh --backend cuda --no-kernels), builds
# tests/cuda against it with nvcc_wrapper, and runs copy_engine_check --version.
# Environment: MINILST_SOURCE (the source tree), MINILST_BUILD (a scratch dir).
set -euo pipefail
src=${MINILST_SOURCE:?}
out=${MINILST_BUILD:?}/cuda-checks
prefix=$(bash "$src/scripts/build_kokkos.sh" --backend cuda --no-kernels | tail -n 1)
export PATH=/usr/local/cuda/bin:$PATH
cmake -S "$src/tests/cuda" -B "$out" -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$prefix" \
  -DCMAKE_CXX_COMPILER="$prefix/bin/nvcc_wrapper" > "$out.configure.log" 2>&1 || { cat "$out.configure.log"; exit 1; }
cmake --build "$out" -j 2 > "$out.build.log" 2>&1 || { tail -50 "$out.build.log"; exit 1; }
# No GPU driver here: the CUDA toolkit's stub libcuda lets the program start (it
# touches no GPU for --version).
mkdir -p "$out/stubs"
ln -sf /usr/local/cuda/lib64/stubs/libcuda.so "$out/stubs/libcuda.so.1"
LD_LIBRARY_PATH="$out/stubs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$out/copy_engine_check" --version
