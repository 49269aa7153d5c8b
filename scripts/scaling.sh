#!/usr/bin/env bash
# Sequence-parallel scaling sweep: runs one deck (default inputs/scaling_cpu.yaml)
# with every attention strategy at each rank count, then compares them with
# analysis/scaling.py (table, ring-vs-Ulysses line, hidden ring-communication
# fraction, PNG).
#   scripts/scaling.sh [DECK] [--set section.key=value ...]
#   RANKS="1 2 4 8" scripts/scaling.sh                          other rank counts
#   LAUNCH="srun --mpi=pmix -n" RANKS="1 4 8 16" scripts/scaling.sh   on a cluster
#
# Runs, in runs/scaling_<UTC time>_<job>_<pid>/ (a new directory per sweep; one <strategy>_np<N>.h5 metrics file and
# one .log each):
#   N = 1        local       (parallel.ulysses = ring = 1)
#   each N > 1   ulysses     (U = N)
#                ring_<layout>            (R = N, ring_overlap = true)
#                ring_<layout>_nooverlap  (R = N, ring_overlap = false: every
#                             transfer is waited on, so its ring_wait is the whole
#                             transfer time; the hidden fraction is estimated from it)
#                hybrid_u<U>r<R>  when N >= 4: U x R = N with U the largest divisor
#                             of N <= sqrt(N) (N = 4: 2 x 2)
# A strategy the deck cannot run (heads % U, kv_heads vs U, seq_len too short:
# minilst exits 2 before doing any work) is recorded as skipped; any other
# failure stops the sweep and shows the run's log.
#
# On a cluster change:
#   LAUNCH   the launcher prefix the rank count is appended to; default
#            "mpiexec --oversubscribe -n"; Slurm: LAUNCH="srun --mpi=pmix -n"
#            (inside an allocation: salloc -N 2 --ntasks-per-node=4, or an sbatch
#            script that calls this one); add binding options there, e.g.
#            LAUNCH="srun --mpi=pmix --cpu-bind=cores -n".
#   RANKS    the rank counts, default "1 2 4"; keep 1 in it (the local baseline)
#   the deck a larger seq_len (and model) so each rank has enough work; the
#            ring layout with RING_LAYOUT=contiguous (default zigzag).
#   BUILD_DIR / build options as for scripts/build.sh (e.g. a CUDA build), and
#   SKIP_SETUP=1 where scripts/setup.sh (Debian packages) does not apply;
#   MINILST=path/to/minilst runs that program (no set-up, no build).
#   RUNS_DIR the parent of the sweep's directory (default: runs/ of the checkout).
# In an installed tree (PREFIX/share/minilst/scripts/scaling.sh) nothing is set up
# or built: it runs the installed program (scripts/lib/minilst_program.sh), in
# ./runs/scaling_... (RUNS_DIR to put it elsewhere).
# More ranks than cores (the default "1 2 4" on a 2-core machine) oversubscribes:
# such timings only show that the code runs, not how it scales.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib/minilst_program.sh"
# Set up and build only in a checkout, outside a job (inside one, build on the login node first).
if minilst_checkout "$root" && [[ -z ${MINILST:-}${SLURM_JOB_ID:-} ]]; then
  [[ ${SKIP_SETUP:-0} == 1 ]] || bash "$root/scripts/setup.sh"
  bash "$root/scripts/build.sh"
fi
exe=$(minilst_program "$root") || { echo "scaling: build or install miniLST first" >&2; exit 2; }
source "$root/scripts/env.sh"
source "$root/scripts/lib/unique_dir.sh"

deck="$root/inputs/scaling_cpu.yaml"
if [[ $# -gt 0 && $1 != --* ]]; then deck=$(realpath "$1"); shift; fi
[[ -f $deck ]] || { echo "scaling: no deck $deck" >&2; exit 2; }
read -r -a launch <<< "${LAUNCH:-mpiexec --oversubscribe -n}"
read -r -a ranks <<< "${RANKS:-1 2 4}"
layout=${RING_LAYOUT:-zigzag}

out=$(unique_dir "$(minilst_runs_dir "$root")" scaling)
out=$(realpath "$out")
cd "$out"
echo "scaling: deck $deck, ranks ${ranks[*]}, launcher '${launch[*]}', into $out"
cores=$(getconf _NPROCESSORS_ONLN)  # not nproc: it follows OMP_NUM_THREADS, which env.sh sets to 1
for n in "${ranks[@]}"; do
  if [[ -z ${LAUNCH:-} && $n -gt $cores ]]; then
    echo "scaling: note: $n ranks on $cores cores oversubscribe this machine: timings at $n ranks are not meaningful"
  fi
done

skipped=()
ran=0
# run NAME N [--set ...]: one run of the deck on N ranks, metrics NAME_npN.h5, log NAME_npN.log
run() {
  local name=$1 n=$2; shift 2
  local tag="${name}_np${n}" rc t0=$SECONDS
  set +e
  "${launch[@]}" "$n" "$exe" run "$deck" "${user_sets[@]}" "$@" --set "output.metrics=$out/$tag.h5" \
    > "$out/$tag.log" 2>&1
  rc=$?
  set -e
  if [[ $rc -eq 0 ]]; then
    ran=$((ran + 1))
    printf '  %-28s %3d s  %s\n' "$tag" $((SECONDS - t0)) "$(grep '^RESULT:' "$out/$tag.log" | cut -d' ' -f2-5)"
  elif [[ $rc -eq 2 && $name != local ]]; then  # bad configuration for this strategy: nothing ran
    skipped+=("$tag")
    printf '  %-28s skipped: %s\n' "$tag" "$(grep -m1 '^error' "$out/$tag.log" || echo "exit 2, see $tag.log")"
  else
    echo "scaling: $tag failed (exit $rc); its log $out/$tag.log:" >&2
    cat "$out/$tag.log" >&2
    exit "$rc"
  fi
}

user_sets=("$@")  # the caller's --set overrides; the strategy's own --set come after them and win
for n in "${ranks[@]}"; do
  if [[ -n ${SLURM_NTASKS:-} && $n -gt $SLURM_NTASKS ]]; then  # beyond the allocation: recorded, not fatal
    skipped+=("every strategy on $n ranks (the allocation has $SLURM_NTASKS tasks)")
    continue
  fi
  if [[ $n -eq 1 ]]; then
    run local 1 --set parallel.ulysses=1 --set parallel.ring=1
    continue
  fi
  run ulysses "$n" --set parallel.ulysses="$n" --set parallel.ring=1
  ring=(--set parallel.ulysses=1 --set parallel.ring="$n" --set parallel.ring_layout="$layout")
  run "ring_$layout" "$n" "${ring[@]}" --set parallel.ring_overlap=true
  run "ring_${layout}_nooverlap" "$n" "${ring[@]}" --set parallel.ring_overlap=false
  if [[ $n -ge 4 ]]; then
    u=1
    for ((d = 2; d * d <= n; d++)); do if ((n % d == 0)); then u=$d; fi; done
    if [[ $u -gt 1 ]]; then
      r=$((n / u))
      run "hybrid_u${u}r${r}" "$n" --set parallel.ulysses="$u" --set parallel.ring="$r" \
        --set parallel.ring_layout="$layout" --set parallel.ring_overlap=true
    fi
  fi
done
((${#skipped[@]} == 0)) || echo "scaling: skipped (deck constraints): ${skipped[*]}"
((ran > 0)) || { echo "scaling: no run succeeded" >&2; exit 1; }

echo
/usr/bin/python3 "$root/analysis/scaling.py" "$out" --png "$out/scaling.png" --csv "$out/scaling.csv" \
  | tee "$out/scaling.txt"
echo
echo "table:   $out/scaling.txt (CSV: $out/scaling.csv)"
echo "figure:  $out/scaling.png"
echo "runs:    $out/*.h5, *.log"
