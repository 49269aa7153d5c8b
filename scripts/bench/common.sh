# shellcheck shell=bash
# Sourced by the benchmark scripts: strict mode, the repository root, set-up and
# build (skipped when MINILST=path/to/minilst or MINILST_BIN_DIR=dir names a
# build, and in an installed tree), the run-time environment, and where the
# programs are: $minilst, $bin (the directory of minilst_bench_mst and
# minilst_bench_kernels: MINILST_BIN_DIR, else minilst's own), $py.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/scripts/lib/minilst_program.sh"
if minilst_checkout "$root" && [[ -z ${MINILST:-}${MINILST_BIN_DIR:-} ]]; then
  bash "$root/scripts/setup.sh"
  bash "$root/scripts/build.sh" > /dev/null
fi
source "$root/scripts/env.sh"
source "$root/scripts/lib/unique_dir.sh"
if [[ -n ${MINILST_BIN_DIR:-} ]]; then
  bin=$MINILST_BIN_DIR
  minilst=${MINILST:-$bin/minilst}
else
  minilst=$(minilst_program "$root") || exit 2  # the build tree, or the installed bin/
  bin=$(dirname "$minilst")
fi
py=/usr/bin/python3

# shellcheck disable=SC2034  # rounds, np, deck: read by the scripts that source this file
bench_options() {  # bench_options SCRIPT ARGS...: the round-robin benchmarks' options into $rounds (--rounds,
  # 3), $np (--np, 2), $deck (--deck, the scaling deck) and $sets (--set key=value, repeatable)
  local script=$1
  shift
  rounds=3 np=2 deck="$root/inputs/scaling_cpu.yaml" sets=()
  while (($#)); do
    case $1 in
      --rounds) rounds=$2; shift 2 ;;
      --np) np=$2; shift 2 ;;
      --deck) deck=$(realpath "$2"); shift 2 ;;
      --set) sets+=(--set "$2"); shift 2 ;;
      *) echo "$script: unknown argument '$1'" >&2; exit 2 ;;
    esac
  done
}

bench_dir() {  # bench_dir NAME: $out = OUT, else a new runs/bench/NAME_<UTC time>/; $launch: LAUNCH, else the default launcher
  out=${OUT:-$(unique_dir "$root/runs/bench" "$1")}
  mkdir -p "$out"
  read -r -a launch <<< "${LAUNCH:-$MINILST_LAUNCH}"
}

# OpenBLAS kernel sets this CPU can run: scripts/lib/blas.sh (sourced by env.sh above).
blas_named_sets="SapphireRapids Cooperlake SkylakeX Haswell Zen"  # what step.sh measures, where the CPU can run them

blas_candidates() {  # the named kernel sets worth measuring that this CPU can run, one a line (none on aarch64)
  local c
  for c in $blas_named_sets; do [[ -n $(blas_missing "$c") ]] || echo "$c"; done
}

blas_sgemm_probe() {  # blas_sgemm_probe [CORETYPE]: "GFLOP/s CORE" of SGEMM 2048^3 (KokkosBlas, OpenBLAS) with those
  # kernels (none: as OpenBLAS detects), CORE the set OpenBLAS reports ("?" if it does not), in a
  # subprocess; any failure (signal, exit status, no rate, OpenBLAS running another set) prints a
  # note on stderr and returns 1.
  local want=${1:-} err out="" rc=0 rate core why=""
  local cmd=(env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2)  # VERBOSE=2: OpenBLAS prints "Core: <set>" on stderr
  [[ -z $want ]] || cmd=(env OPENBLAS_CORETYPE="$want" OPENBLAS_VERBOSE=2)
  ! command -v timeout > /dev/null || cmd+=(timeout 300)
  err=$(mktemp)
  out=$("${cmd[@]}" "$bin/minilst_bench_kernels" --gemm-fp32 blas sgemm 2> "$err") || rc=$?
  core=$(sed -n 's/^Core: *//p' "$err" | tail -n 1)
  if ((rc == 124)); then why="timed out"
  elif ((rc > 128)); then why="killed by SIG$(kill -l $((rc - 128)) 2> /dev/null || echo $((rc - 128)))"
  elif ((rc != 0)); then why="exit status $rc"
  elif ! rate=$("$py" -c "import json,sys; r = float(json.load(sys.stdin)['gflops']); assert r > 0; print(r)" <<< "$out" 2> /dev/null)
  then why="no SGEMM rate in its output${out:+: $out}"
  elif [[ -n $want && -n $core && ${core,,} != "${want,,}" ]]; then why="this OpenBLAS has no $want kernels (it ran $core)"
  fi
  if [[ -n $why ]]; then
    echo "note: SGEMM probe with OPENBLAS_CORETYPE=${want:-<unset>} failed ($why); skipped" >&2
    sed 's/^/note:   /' "$err" | tail -n 5 >&2
    rm -f "$err"
    return 1
  fi
  rm -f "$err"
  echo "$rate ${core:-?}"
}

fastest_blas_coretype() {  # prints the OPENBLAS_CORETYPE to run with: the candidate whose SGEMM beats OpenBLAS's
  # own choice by more than 10% (nothing: keep OpenBLAS's); one line per measurement on stderr
  local best="" best_rate=0 line rate core c missing
  if line=$(blas_sgemm_probe); then
    read -r best_rate core <<< "$line"
    if [[ $core == "?" ]]; then core=""; else core=" ($core)"; fi
    echo "OpenBLAS as detected$core: SGEMM $best_rate GFLOP/s" >&2
  fi
  for c in $blas_named_sets; do
    missing=$(blas_missing "$c")
    [[ -z $missing ]] || echo "OPENBLAS_CORETYPE=$c: not offered, this CPU lacks $missing" >&2
  done
  for c in $(blas_candidates); do
    line=$(blas_sgemm_probe "$c") || continue
    read -r rate core <<< "$line"
    echo "OPENBLAS_CORETYPE=$c: SGEMM $rate GFLOP/s" >&2
    if awk -v a="$rate" -v b="$best_rate" 'BEGIN { exit !(a > 1.1 * b) }'; then best=$c best_rate=$rate; fi
  done
  echo "$best"
}
