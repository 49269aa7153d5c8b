#!/usr/bin/env bash
# Builds miniLST for an NVIDIA GPU and packs a folder that runs on a bare CUDA node:
# no MPI, HDF5, yaml-cpp or Kokkos installed there, only the driver and the CUDA
# toolkit's runtime and cuBLAS. Prints the folder as its last line.
#
#   scripts/gpu/pack.sh [--out DIR] [--arch HOPPER90] [-j N]
#
# 1. The Kokkos 4 + Kokkos Kernels CUDA stack as shared libraries (scripts/build_kokkos.sh
#    --backend cuda --shared; cached in ~/.cache/minilst), for --arch (Kokkos_ARCH_<NAME>;
#    HOPPER90 = sm_90: H100, H200).
# 2. miniLST against it in $MINILST_GPU_BUILD (default build-cuda/): a single-process
#    build (MINILST_ENABLE_MPI=OFF: one GPU, no launcher, no NCCL; the library compiled
#    in batches of files, MINILST_UNITY_CORE: nvcc reads the headers once a batch), cuBLAS for the
#    bf16 GEMMs, the tensor-core attention, the CUDA copy engine; with the test
#    programs, all linking one shared libminilst_core (the device code once, not once
#    per program). Then the CUDA checks of their own (tests/cuda/: the copy engine, and
#    the NCCL communicator compiled for CUDA where MPI and NCCL are found).
# 3. The folder (default gpu-bundle/ in the checkout, which git ignores; a device
#    run carries it):
#      bin/     minilst, minilst_bench_kernels, minilst_bench_mst
#      tests/   the GoogleTest programs and copy_engine_check
#      lib/     every shared library they need that a CUDA node lacks (HDF5 and
#               what it needs, yaml-cpp, ...), found through RUNPATH $ORIGIN/../lib
#      inputs/  the decks;  peer/  the PyTorch peer (analysis/peer/torch_step.py)
#      MANIFEST what was built, from which commit, with which toolkit
#    The C/C++ runtime, the driver (libcuda), cudart and cuBLAS are left to the node.
#    scripts/gpu/check_bundle.py proves it (every needed library resolves inside the
#    folder or among those) and that the folder fits in 48 MiB.
# Needs: the CUDA toolkit (CUDA_HOME or /usr/local/cuda), the Kokkos sources
# (MINILST_VENDOR, see scripts/build_kokkos.sh), patchelf (scripts/setup.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/gpu-bundle arch=HOPPER90 jobs=$(nproc)
while (($#)); do
  case $1 in
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "pack.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
cuda=${CUDA_HOME:-/usr/local/cuda}
[[ -x $cuda/bin/nvcc ]] || { echo "pack.sh: no CUDA toolkit ($cuda/bin/nvcc; set CUDA_HOME)" >&2; exit 2; }
command -v patchelf > /dev/null || { echo "pack.sh: patchelf is missing (scripts/setup.sh installs it)" >&2; exit 2; }
build=${MINILST_GPU_BUILD:-$root/build-cuda}
[[ $build == /* ]] || build=$root/$build
log() { echo "pack.sh: $*" >&2; }

t0=$SECONDS
prefix=$(bash "$root/scripts/build_kokkos.sh" --backend cuda --arch "$arch" --shared -j "$jobs" | tail -n 1)
log "CUDA Kokkos stack: $prefix ($((SECONDS - t0)) s)"

t0=$SECONDS
# Device code compressed for size in the fatbinaries (nvcc reads NVCC_APPEND_FLAGS; the Kokkos
# wrapper passes no nvcc option it does not know): about a tenth of the default's bytes.
export NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:+$NVCC_APPEND_FLAGS }--compress-mode=size"
# CMake does not see that variable: a build folder compiled with other nvcc flags starts afresh.
if [[ -d $build && "$(cat "$build/.pack-nvcc-flags" 2> /dev/null)" != "$NVCC_APPEND_FLAGS" ]]; then rm -rf "$build"; fi
mkdir -p "$build"
echo "$NVCC_APPEND_FLAGS" > "$build/.pack-nvcc-flags"
KOKKOS_PREFIX=$prefix BUILD_DIR=$build bash "$root/scripts/build.sh" -DMINILST_ENABLE_MPI=OFF -DMINILST_SHARED_CORE=ON -DMINILST_UNITY_CORE=ON -DMINILST_ENABLE_GLPK=ON \
  -DMINILST_NCCL_COMPILE_CHECK=OFF > "$build.log" 2>&1 || { tail -60 "$build.log" >&2; exit 1; }
grep "miniLST " "$build.log" | head -2 >&2
export PATH=$cuda/bin:$PATH
cmake -S "$root/tests/cuda" -B "$build/checks" -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$prefix" \
  -DCMAKE_CXX_COMPILER="$prefix/bin/nvcc_wrapper" > "$build.checks.log" 2>&1 || { cat "$build.checks.log" >&2; exit 1; }
cmake --build "$build/checks" -j "$jobs" >> "$build.checks.log" 2>&1 || { tail -50 "$build.checks.log" >&2; exit 1; }
log "miniLST for CUDA built in $((SECONDS - t0)) s"

# The folder, made beside its final place and renamed into it: never half a bundle.
tmp=$(mktemp -d "$(dirname "$out")/.gpu-bundle-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/{bin,tests,lib,inputs,machines,peer}
cp "$build"/minilst "$build"/minilst_bench_kernels "$build"/minilst_bench_mst "$tmp/bin/"
cp -L "$build"/libminilst_core.so "$tmp/lib/"
find "$build/tests" -maxdepth 1 -type f -name 'test_*' -perm -u+x -exec cp {} "$tmp/tests/" \;
cp "$build/checks/copy_engine_check" "$tmp/tests/"
cp "$root"/inputs/*.yaml "$tmp/inputs/"
cp "$root"/machines/*.yaml "$tmp/machines/"  # test_predict reads the shipped machine files (MINILST_MACHINES)
cp "$root"/analysis/peer/*.py "$tmp/peer/"

# What the node provides: the C/C++ runtime, the driver, cudart and cuBLAS
# (scripts/gpu/check_bundle.py holds the same list and checks the result).
provided='^(linux-vdso|ld-linux[^ ]*|libc|libm|libdl|librt|libpthread|libresolv|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnvidia-ml)\.so'
copy_needed() {  # copy_needed ELF: the libraries it needs that the node lacks, into lib/, recursively
  local lib path
  while read -r lib path; do
    lib=$(basename "$lib")  # the loader's line names it with its path
    [[ $lib =~ $provided ]] && continue
    [[ -e $tmp/lib/$lib ]] && continue
    [[ -n $path && -e $path ]] || { log "$1 needs $lib, which is not found here"; exit 1; }
    cp -L "$path" "$tmp/lib/$lib"
    copy_needed "$tmp/lib/$lib"
  done < <(ldd "$1" | awk '/=>/ { print $1, $3 } !/=>/ { print $1, "" }')
}
for f in "$tmp"/bin/* "$tmp"/tests/*; do copy_needed "$f"; done
for f in "$tmp"/bin/* "$tmp"/tests/*; do
  strip --strip-unneeded "$f"
  patchelf --set-rpath '$ORIGIN/../lib' "$f"
done
for f in "$tmp"/lib/*; do
  chmod u+w "$f"
  strip --strip-unneeded "$f" 2> /dev/null || true
  patchelf --set-rpath '$ORIGIN' "$f"
done
{
  echo "miniLST GPU bundle"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  echo "commit: $(git -C "$root" rev-parse HEAD 2> /dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2> /dev/null || echo ' (with local changes)')"
  echo "kokkos: $prefix (Kokkos_ARCH_$arch)"
  echo "nvcc: $("$cuda/bin/nvcc" --version | tail -n 2 | head -n 1)"
  echo "configuration: $(grep -E "miniLST [0-9]" "$build.log" | head -1 | sed 's/^-- //')"
  echo "from the node: C/C++ runtime, libcuda (driver), libcudart, libcublas, libcublasLt"
  echo "files:"
  (cd "$tmp" && find . -type f | sort | xargs du -k | awk '{ printf "  %7d KiB  %s\n", $1, $2 }')
} > "$tmp/MANIFEST"
python3 "$root/scripts/gpu/check_bundle.py" "$tmp" >&2
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
log "bundle: $(du -sh "$out" | cut -f1)"
echo "$out"
