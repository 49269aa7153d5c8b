# Sourced by scripts/env.sh: which OpenBLAS kernel sets this CPU can run.
# Debian's OpenBLAS carries kernels for many CPUs and picks them at run time;
# OPENBLAS_CORETYPE forces a set, and a set whose instructions the CPU lacks dies
# with SIGILL. So the scripts only ever name sets the CPU can run (its flags in
# /proc/cpuinfo; MINILST_CPUINFO=file reads another one, for testing; the benchmarks
# also probe each in a subprocess whose failure skips it: scripts/bench/common.sh).
# An OPENBLAS_CORETYPE from the environment is honoured unless it names kernels the
# CPU cannot run: then it is dropped with a warning, since it would kill every process.

cpu_isa() {  # "x86 FLAG...", "arm FEATURE..." or "ARCH": the CPU's family and its extensions, from
  # MINILST_CPUINFO (default /proc/cpuinfo); no flags there: none (so no vector kernel set is offered)
  local f=${MINILST_CPUINFO:-/proc/cpuinfo} line
  line=$(grep -m1 -E '^flags[[:space:]]*:' "$f" 2> /dev/null) || line=""
  if [[ -n $line ]]; then echo "x86 ${line#*:}"; return; fi
  line=$(grep -m1 -E '^Features[[:space:]]*:' "$f" 2> /dev/null) || line=""
  if [[ -n $line ]]; then echo "arm ${line#*:}"; return; fi
  case $(uname -m) in
    x86_64|i?86) echo x86 ;;
    aarch64|arm64) echo arm ;;
    *) uname -m ;;
  esac
}

blas_kernel_needs() {  # blas_kernel_needs CORETYPE: "x86|arm FLAG..." what OpenBLAS's kernels of that name need; fails for names not listed
  local avx512="avx512f avx512cd avx512bw avx512dq avx512vl"
  case ${1,,} in
    sapphirerapids) echo "x86 $avx512 avx512_bf16 amx_tile amx_bf16" ;;
    cooperlake) echo "x86 $avx512 avx512_bf16" ;;
    skylakex) echo "x86 $avx512" ;;
    haswell|zen) echo "x86 avx2 fma" ;;
    sandybridge) echo "x86 avx" ;;
    bulldozer|piledriver|steamroller|excavator) echo "x86 avx fma4" ;;
    nehalem) echo "x86 sse4_2" ;;
    penryn|dunnington) echo "x86 sse4_1" ;;
    core2|atom|nano) echo "x86 ssse3" ;;
    bobcat) echo "x86 ssse3 sse4a" ;;
    barcelona) echo "x86 sse4a" ;;
    prescott|opteron_sse3) echo "x86 pni" ;;
    katmai|coppermine|northwood|banias|athlon|opteron) echo "x86" ;;
    a64fx|armv8sve|neoversev1|neoversev2|neoversen2) echo "arm sve" ;;
    armv8|cortexa53|cortexa55|cortexa57|cortexa72|cortexa73|cortexa76|cortexa510|cortexa710|cortexx1|cortexx2 \
      |neoversen1|thunderx|thunderx2t99|thunderx3t110|tsv110|emag8180|falkor|ft2000) echo "arm" ;;
    *) return 1 ;;
  esac
}

blas_missing() {  # blas_missing CORETYPE: what this CPU lacks for those kernels (nothing: it can run them, or the name is not listed)
  local needs need=() isa missing=() f
  needs=$(blas_kernel_needs "$1") || return 0
  isa=$(cpu_isa)
  read -r -a need <<< "$needs"
  if [[ ${isa%% *} != "${need[0]}" ]]; then echo "${need[0]} instructions (an ${isa%% *} CPU)"; return 0; fi
  for f in "${need[@]:1}"; do [[ " $isa " == *" $f "* ]] || missing+=("$f"); done
  echo "${missing[*]}"
}

blas_check_coretype() {  # an OPENBLAS_CORETYPE from the environment naming kernels this CPU cannot run: warn, unset it
  local missing
  [[ -n ${OPENBLAS_CORETYPE:-} ]] || return 0
  missing=$(blas_missing "$OPENBLAS_CORETYPE")
  [[ -n $missing ]] || return 0
  echo "warning: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE names kernels this CPU cannot run (it lacks $missing):" \
    "ignored for this run, as if unset" >&2
  unset OPENBLAS_CORETYPE
}
