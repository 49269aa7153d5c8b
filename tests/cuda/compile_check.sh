#!/usr/bin/env bash
# The whole program compiled for CUDA where no GPU is: builds (or finds cached)
# Kokkos + Kokkos Kernels for CUDA (scripts/build_kokkos.sh --backend cuda:
# nvcc_wrapper, sm_90, cuBLAS), builds every miniLST target against it (the
# kernels, the model, the strategies, the NCCL communicator, the CUDA copy engine,
# the tests and benchmarks), then the copy engine's own check program, and runs
# its --version (no GPU needed). Exits 77 (ctest: skipped) with a message where
# the CUDA toolkit or the Kokkos sources are missing.
# Environment: MINILST_SOURCE (the source tree), MINILST_BUILD (a scratch dir), MINILST_VENDOR.
set -euo pipefail
src=${MINILST_SOURCE:?}
out=${MINILST_BUILD:?}/cuda-compile-check
cuda=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -x $cuda/bin/nvcc ]]; then echo "skipped: no CUDA toolkit ($cuda/bin/nvcc)"; exit 77; fi
if ! ls "${MINILST_VENDOR:-/nonexistent}"/kokkos-[0-9]*.tar.gz > /dev/null 2>&1; then
  echo "skipped: no Kokkos sources (MINILST_VENDOR)"; exit 77
fi
mkdir -p "$out"
t0=$SECONDS
prefix=$(bash "$src/scripts/build_kokkos.sh" --backend cuda | tail -n 1)
echo "CUDA Kokkos stack: $prefix ($((SECONDS - t0)) s)"
t0=$SECONDS
KOKKOS_PREFIX=$prefix BUILD_DIR=$out/minilst bash "$src/scripts/build.sh" -DMINILST_NCCL_COMPILE_CHECK=OFF \
  > "$out.minilst.log" 2>&1 || { tail -60 "$out.minilst.log"; exit 1; }
grep "miniLST " "$out.minilst.log" | head -2
grep -q "NCCL backend: TRUE" "$out/minilst.configure.log" || { echo "FAIL: the NCCL backend was not built"; exit 1; }
echo "miniLST for CUDA: $(ls "$out/minilst"/minilst "$out/minilst"/minilst_bench_* "$out/minilst"/tests/test_* | wc -l) programs ($((SECONDS - t0)) s)"
export PATH=$cuda/bin:$PATH
cmake -S "$src/tests/cuda" -B "$out/checks" -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$prefix" \
  -DCMAKE_CXX_COMPILER="$prefix/bin/nvcc_wrapper" > "$out.checks.log" 2>&1 || { cat "$out.checks.log"; exit 1; }
cmake --build "$out/checks" -j 2 >> "$out.checks.log" 2>&1 || { tail -50 "$out.checks.log"; exit 1; }
# No GPU driver here: the CUDA toolkit's stub libcuda lets the program start (--version touches no GPU).
mkdir -p "$out/stubs"
ln -sf "$cuda/lib64/stubs/libcuda.so" "$out/stubs/libcuda.so.1"
LD_LIBRARY_PATH="$out/stubs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$out/checks/copy_engine_check" --version
