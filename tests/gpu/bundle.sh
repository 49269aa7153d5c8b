#!/usr/bin/env bash
# The GPU bundle built and checked where no GPU is (the test stage `cuda`):
# scripts/gpu/pack.sh builds (or finds cached) the CUDA Kokkos stack, builds the
# single-process CUDA program, its test programs and the CUDA checks, packs them with
# every library a bare CUDA node lacks and checks the result (scripts/gpu/check_bundle.py:
# every needed library inside the bundle or provided by the node; 48 MiB at most).
# Then the copy engine's check starts from the bundle with the toolkit's stub driver
# (--version touches no GPU). Exits 77 (ctest: skipped) with a message where the CUDA
# toolkit or the Kokkos sources are missing. Environment: MINILST_SOURCE, MINILST_VENDOR.
set -euo pipefail
src=${MINILST_SOURCE:?}
cuda=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -x $cuda/bin/nvcc ]]; then echo "skipped: no CUDA toolkit ($cuda/bin/nvcc)"; exit 77; fi
if ! ls "${MINILST_VENDOR:-/nonexistent}"/kokkos-[0-9]*.tar.gz > /dev/null 2>&1; then
  echo "skipped: no Kokkos sources (MINILST_VENDOR)"; exit 77
fi
t0=$SECONDS
bundle=$(bash "$src/scripts/gpu/pack.sh" | tail -n 1)
echo "bundle: $bundle ($((SECONDS - t0)) s)"
python3 "$src/scripts/gpu/check_bundle.py" "$bundle"
for p in minilst minilst_bench_kernels minilst_bench_mst; do [[ -x $bundle/bin/$p ]] || { echo "FAIL: no bin/$p"; exit 1; }; done
ls "$bundle"/tests/test_kernels > /dev/null && ls "$bundle"/tests/copy_engine_check > /dev/null
stubs=$(mktemp -d)
trap 'rm -rf "$stubs"' EXIT
ln -s "$cuda/lib64/stubs/libcuda.so" "$stubs/libcuda.so.1"  # no driver here: the toolkit's stub lets it start
LD_LIBRARY_PATH="$stubs:$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bundle/tests/copy_engine_check" --version
