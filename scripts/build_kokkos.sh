#!/usr/bin/env bash
# Builds and installs Kokkos 4 (+ Kokkos Kernels, BLAS component only) for one
# backend, into a cache directory outside the repository. Idempotent: when the
# same sources, patches and options are already installed at the prefix it
# does nothing. Prints the install prefix as its last line.
#
#   scripts/build_kokkos.sh --backend openmp|cuda [--kokkos-src TARBALL|DIR]
#       [--kernels-src TARBALL|DIR] [--patch FILE]... [--prefix DIR]
#       [--arch KOKKOS_ARCH] [--no-kernels] [--shared] [-j N]
#
#   openmp  Kokkos Serial + OpenMP; Kokkos Kernels with OpenBLAS behind its BLAS
#   cuda    Kokkos Serial + CUDA (compiler: the Kokkos tree's nvcc_wrapper, CUDA
#           from /usr/local/cuda or $CUDA_HOME); Kokkos Kernels with cuBLAS,
#           instantiated for the CUDA spaces only. --arch defaults to HOPPER90
#           (Kokkos_ARCH_<NAME>, e.g. AMPERE80); --patch FILE for patches that
#           the Kokkos sources need (CUDA 13 needs one for Kokkos <= 4.6).
#   --no-kernels  Kokkos alone (enough for code that does not call KokkosBlas).
#   --shared      shared libraries (default: static), for programs that share one
#                 Kokkos through a shared miniLST library (the GPU bundle, scripts/gpu/pack.sh).
#
# Sources: a release tarball or an unpacked tree of each project (a cluster user
# points at what they downloaded). Without --kokkos-src the script looks in
# $MINILST_VENDOR for kokkos-*.tar.gz and kokkos-kernels-*.tar.gz.
# Prefix: default $MINILST_CACHE/kokkos-<backend>-<stamp>, MINILST_CACHE
# defaulting to ~/.cache/minilst; <stamp> is a hash of sources and options.
# Then: KOKKOS_PREFIX=<prefix> BUILD_DIR=build-<backend> scripts/build.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

backend="" kokkos_src="" kernels_src="" prefix="" arch="" kernels=1 shared=OFF jobs=$(nproc)
patches=()
while (($#)); do
  case $1 in
    --backend) backend=$2; shift 2 ;;
    --kokkos-src) kokkos_src=$2; shift 2 ;;
    --kernels-src) kernels_src=$2; shift 2 ;;
    --patch) patches+=("$(realpath "$2")"); shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --no-kernels) kernels=0; shift ;;
    --shared) shared=ON; shift ;;
    -j) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_kokkos.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case $backend in
  openmp|cuda) ;;
  *) echo "build_kokkos.sh: --backend openmp|cuda is required" >&2; exit 2 ;;
esac

vendor=$(realpath -m "${MINILST_VENDOR:-$root/../shared/vendor}")
pick() {  # pick NAME_GLOB: the one vendored tarball that matches
  local found=("$vendor"/$1)
  [[ -e ${found[0]} ]] || { echo "build_kokkos.sh: no $1 in $vendor; pass --kokkos-src/--kernels-src" >&2; exit 2; }
  echo "${found[0]}"
}
[[ -n $kokkos_src ]] || kokkos_src=$(pick 'kokkos-[0-9]*.tar.gz')
if ((kernels)) && [[ -z $kernels_src ]]; then kernels_src=$(pick 'kokkos-kernels-[0-9]*.tar.gz'); fi
kokkos_src=$(realpath "$kokkos_src")
[[ -z $kernels_src ]] || kernels_src=$(realpath "$kernels_src")

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [[ $backend == cuda ]]; then
  [[ -x $cuda_home/bin/nvcc ]] || { echo "build_kokkos.sh: no nvcc in $cuda_home/bin (set CUDA_HOME)" >&2; exit 2; }
  arch=${arch:-HOPPER90}
  # The vendored Kokkos 4.6.99 snapshot needs its CUDA 13 patch with CUDA >= 13.
  if ((${#patches[@]} == 0)) && [[ $kokkos_src == "$vendor"/* ]] && ls "$vendor"/kokkos-*-cuda13.patch >/dev/null 2>&1 \
     && [[ $("$cuda_home/bin/nvcc" --version) =~ release\ 1[3-9] ]]; then
    patches=("$(ls "$vendor"/kokkos-*-cuda13.patch)")
  fi
fi

common=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=$shared)
kokkos_opts=(-DKokkos_ENABLE_SERIAL=ON)
# Kokkos Kernels without explicit instantiations (ETI): miniLST calls one routine,
# KokkosBlas::gemm on float and double, and only through the vendor BLAS (OpenBLAS or
# cuBLAS), whose specialisations are header-only. Instantiating every BLAS routine for
# every type, layout and space cost most of the stack's build time and nothing here uses it.
kernels_opts=(-DKokkosKernels_ENABLE_ALL_COMPONENTS=OFF -DKokkosKernels_ENABLE_COMPONENT_BLAS=ON
  -DKokkosKernels_ADD_DEFAULT_ETI=OFF -DKokkosKernels_INST_FLOAT=OFF -DKokkosKernels_INST_DOUBLE=OFF
  -DKokkosKernels_INST_LAYOUTRIGHT=OFF -DKokkosKernels_INST_LAYOUTLEFT=OFF -DKokkosKernels_INST_ORDINAL_INT=OFF
  -DKokkosKernels_INST_OFFSET_INT=OFF -DKokkosKernels_INST_OFFSET_SIZE_T=OFF
  -DKokkosKernels_ENABLE_TESTS=OFF -DKokkosKernels_ENABLE_PERFTESTS=OFF -DKokkosKernels_ENABLE_EXAMPLES=OFF)
if [[ $backend == openmp ]]; then
  # Kokkos 4.6's mdspan-based View puts an empty accessor at the address of its data
  # handle ([[no_unique_address]]); GCC before 13 zero-initialises that empty member
  # over the handle's reference-count bits, so a default View crashes when destroyed.
  # The legacy View implementation has no such member (nvcc builds never use the attribute).
  kokkos_opts+=(-DKokkos_ENABLE_OPENMP=ON -DKokkos_ENABLE_IMPL_VIEW_LEGACY=ON)
  [[ -z $arch ]] || kokkos_opts+=("-DKokkos_ARCH_$arch=ON")
  kernels_opts+=(-DKokkosKernels_ENABLE_TPL_BLAS=ON -DBLAS_LIBRARIES=openblas
    -DKokkosKernels_INST_EXECSPACE_OPENMP=OFF -DKokkosKernels_INST_EXECSPACE_SERIAL=OFF
    -DKokkosKernels_INST_MEMSPACE_HOSTSPACE=OFF)
else
  export PATH=$cuda_home/bin:$PATH
  kokkos_opts+=(-DKokkos_ENABLE_CUDA=ON "-DKokkos_ARCH_$arch=ON" -DKokkos_ENABLE_CUDA_CONSTEXPR=ON)
  kernels_opts+=(-DKokkosKernels_ENABLE_TPL_CUBLAS=ON -DKokkosKernels_ENABLE_TPL_BLAS=OFF
    -DKokkosKernels_INST_EXECSPACE_CUDA=OFF -DKokkosKernels_INST_MEMSPACE_CUDASPACE=OFF
    -DKokkosKernels_INST_EXECSPACE_SERIAL=OFF -DKokkosKernels_INST_MEMSPACE_HOSTSPACE=OFF)
fi

# What identifies an install: the sources and patches (by content: copies and fresh
# checkouts of the same files hit the cache), and the options.
describe() { for f in "$@"; do [[ -z $f ]] || echo "$(basename "$f") $(tar_or_dir_hash "$f")"; done; }
tar_or_dir_hash() {  # a file's sha256, or a directory's (its files' names and contents)
  if [[ -d $1 ]]; then (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
  else sha256sum "$1" | cut -c1-16; fi
}
stamp_text=$(printf '%s\n' "backend=$backend arch=$arch kernels=$kernels shared=$shared" \
  "$(describe "$kokkos_src" "$kernels_src" "${patches[@]}")" "${kokkos_opts[*]}" "${kernels_opts[*]}")
stamp=$(sha256sum <<< "$stamp_text" | cut -c1-12)
cache=${MINILST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/minilst}
prefix=${prefix:-$cache/kokkos-$backend-$stamp}
prefix=$(realpath -m "$prefix")
if [[ -f $prefix/.minilst-stamp ]] && [[ $(cat "$prefix/.minilst-stamp") == "$stamp_text" ]]; then
  echo "build_kokkos.sh: $backend stack already installed (nothing to do)" >&2
  echo "$prefix"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/minilst-kokkos-XXXXXX")
trap 'rm -rf "$work"' EXIT
unpack() {  # unpack SRC DEST: a tarball or a directory, into DEST (a copy, so patches never touch the original)
  mkdir -p "$2"
  if [[ -d $1 ]]; then cp -a "$1/." "$2/"; else tar xzf "$1" -C "$2" --strip-components=1; fi
}
log() { echo "build_kokkos.sh: $*" >&2; }
step() {  # step NAME CMD...: run quietly into a log, show it on failure
  local name=$1; shift
  local t0=$SECONDS
  if ! "$@" > "$work/$name.log" 2>&1; then tail -40 "$work/$name.log" >&2; log "$name failed"; exit 1; fi
  log "$name done in $((SECONDS - t0)) s"
}

log "installing the $backend stack into $prefix"
common+=(-DCMAKE_INSTALL_PREFIX="$prefix")
unpack "$kokkos_src" "$work/kokkos"
for p in "${patches[@]}"; do step "patch-$(basename "$p")" patch -d "$work/kokkos" -p1 -i "$p"; done

compiler=()  # CUDA: Kokkos' nvcc_wrapper, from the source tree, then the installed one
[[ $backend == cuda ]] && compiler=(-DCMAKE_CXX_COMPILER="$work/kokkos/bin/nvcc_wrapper")
step kokkos-configure cmake -S "$work/kokkos" -B "$work/kokkos-build" "${common[@]}" "${compiler[@]}" "${kokkos_opts[@]}"
step kokkos-build cmake --build "$work/kokkos-build" -j "$jobs"
step kokkos-install cmake --install "$work/kokkos-build"
if ((kernels)); then
  unpack "$kernels_src" "$work/kernels"
  [[ $backend == cuda ]] && compiler=(-DCMAKE_CXX_COMPILER="$prefix/bin/nvcc_wrapper")
  step kernels-configure cmake -S "$work/kernels" -B "$work/kernels-build" "${common[@]}" "${compiler[@]}" -DKokkos_ROOT="$prefix" \
    "${kernels_opts[@]}"
  step kernels-build cmake --build "$work/kernels-build" -j "$jobs"
  step kernels-install cmake --install "$work/kernels-build"
fi
printf '%s\n' "$stamp_text" > "$prefix/.minilst-stamp"
log "installed"
echo "$prefix"
