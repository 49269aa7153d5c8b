#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a tested build: installs what is
# missing, builds, runs every test with ctest (unit, reference, app checks), in stages:
#   serial  Debian's Kokkos 3.4 (Serial), in build/: every test but the CUDA bundle
#   openmp  Kokkos 4 with OpenMP, 2 threads per rank, in build-omp/ (the stack is
#           built once by scripts/build_kokkos.sh into ~/.cache/minilst, where the
#           Kokkos sources are found: MINILST_VENDOR, or the snapshots beside the
#           source tree): what threads change, the kernels, the layouts and the
#           PyTorch references (labels unit, parallel, reference); the program's
#           scripts, batch-job and Slurm behaviour do not depend on the backend and
#           run once, in the serial stage
#   cuda    the GPU bundle (ctest's gpu_bundle, scripts/gpu/pack.sh): the CUDA
#           program, its tests and benchmarks built against a CUDA Kokkos it builds
#           (and caches), packed and checked; skipped with a message where the CUDA
#           toolkit or the Kokkos sources are missing
#   scripts/test.sh [ctest arguments, e.g. -L reference or -R deck]
#   MINILST_TEST_BACKENDS="serial"     only these stages (default: "serial openmp cuda")
# Each stage prints its time, and the whole run its total.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
backends=${MINILST_TEST_BACKENDS:-serial openmp cuda}
# ctest's parallel level: the machine's cores, counted here, before env.sh sets OMP_NUM_THREADS (GNU
# nproc honours it: counted after, every stage ran one test at a time)
jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
vendor=$(realpath -m "${MINILST_VENDOR:-$root/../shared/vendor}")
status=0
# The library compiled in batches of files (MINILST_UNITY_CORE, CMakeLists.txt): shorter builds
# from scratch, as every CI run's is (docs/tests.md, "Stage timings"); a later `scripts/build.sh`
# keeps the setting (-DMINILST_UNITY_CORE=OFF to compile file by file again while editing).
unity=(-DMINILST_UNITY_CORE=ON)
for backend in $backends; do
  t0=$SECONDS
  case $backend in
    serial)
      bash "$root/scripts/build.sh" "${unity[@]}"
      (source "$root/scripts/env.sh"; cd "$root/build" && ctest --output-on-failure --timeout 3000 -j "$jobs" -LE cuda "$@") \
        || status=1
      ;;
    openmp)
      if ! ls "$vendor"/kokkos-[0-9]*.tar.gz > /dev/null 2>&1; then
        echo "test.sh: no Kokkos sources in $vendor (set MINILST_VENDOR): the OpenMP stage is skipped"
        continue
      fi
      prefix=$(MINILST_VENDOR=$vendor bash "$root/scripts/build_kokkos.sh" --backend openmp | tail -n 1)
      KOKKOS_PREFIX=$prefix BUILD_DIR=build-omp bash "$root/scripts/build.sh" "${unity[@]}"
      (export MINILST_THREADS=2; source "$root/scripts/env.sh"; cd "$root/build-omp" &&
        ctest --output-on-failure --timeout 3000 -j "$jobs" -L "unit|parallel|reference" "$@") || status=1
      ;;
    cuda)
      [[ -f $root/build/CTestTestfile.cmake ]] || bash "$root/scripts/build.sh" "${unity[@]}"
      (cd "$root/build" && ctest --output-on-failure -L cuda "$@") || status=1
      ;;
    *) echo "test.sh: unknown stage '$backend' (serial, openmp, cuda)" >&2; exit 2 ;;
  esac
  echo "test.sh: $backend stage took $((SECONDS - t0)) s"
done
echo "test.sh: all stages took $SECONDS s"
exit $status
