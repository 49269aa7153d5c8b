#!/usr/bin/env bash
# A sweep as Slurm job arrays: one array task per point (sequence length x rank
# count x attention strategy x repeat), one array per rank count (its tasks ask for
# that many ranks), all writing into one new sweep directory,
# runs/sweep_<UTC>_<job or "local">_<pid>/ (RUNS_DIR to put it elsewhere):
#   points.tsv            one line per point: index, ranks, seq_len, strategy, repeat, the --set arguments
#   point_<i>/            metrics.h5, minilst.log (stdout and stderr) of point i
# Aggregate it with: /usr/bin/python3 analysis/sweep.py runs/sweep_.../
#
#   scripts/slurm/sweep.sh [DECK] [--set k=v]... [options] [-- sbatch options...]
#     --seq-lens 4096,8192        sequence lengths (default: the deck's)
#     --ranks 1,2,4               rank counts (default 1,2,4)
#     --strategies ulysses,ring   any of local (data parallel), ulysses, ring, hybrid (default ulysses,ring)
#     --scaling strong|weak       weak: seq_len x ranks, the tokens per rank fixed (default strong)
#     --repeats N                 runs of each point (default 3); analysis/sweep.py reports median and spread
#     --local                     run the points here, one after the other (no Slurm), with LAUNCH
#     --dry-run                   write the directory and points.tsv, submit nothing
# Build first, on the login node (scripts/build.sh): the jobs never build. LAUNCH is
# the launcher the rank count is appended to (default "srun --mpi=pmix --unbuffered -n";
# --local: "mpiexec --oversubscribe -n"). A point a deck cannot run (heads not divisible
# by the Ulysses degree, ...) exits 2 at once and is reported as failed by the analysis.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
deck=$root/inputs/scaling_cpu.yaml
sets=() seq_lens="" ranks="1,2,4" strategies="ulysses,ring" scaling=strong repeats=3 mode=submit sbatch_opts=()
if [[ $# -gt 0 && $1 != --* ]]; then deck=$(realpath "$1"); shift; fi
while (($#)); do
  case $1 in
    --set) sets+=("$2"); shift 2 ;;
    --seq-lens) seq_lens=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --strategies) strategies=$2; shift 2 ;;
    --scaling) scaling=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --local) mode=local; shift ;;
    --dry-run) mode=dry; shift ;;
    --) shift; sbatch_opts=("$@"); break ;;
    *) echo "sweep.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ -f $deck ]] || { echo "sweep.sh: no deck $deck" >&2; exit 2; }
[[ $scaling == strong || $scaling == weak ]] || { echo "sweep.sh: --scaling strong|weak" >&2; exit 2; }
exe=$root/${BUILD_DIR:-build}/minilst
[[ -x $exe ]] || { echo "sweep.sh: no $exe: build first (scripts/build.sh)" >&2; exit 2; }
# the deck's own S, as the program resolves it (its reference losses hold at that S only)
deck_S=$("$exe" plan "$deck" "${sets[@]/#/--set=}" --format json --ranks 1 2> /dev/null |
         sed -n 's/.*"seq_len": \([0-9]*\).*/\1/p')
[[ -n $deck_S ]] || deck_S=$(sed -n 's/^ *seq_len: *\([0-9]*\).*/\1/p' "$deck" | head -1)
[[ -n $seq_lens ]] || seq_lens=$deck_S

source "$root/scripts/lib/unique_dir.sh"
sweep=$(unique_dir "${RUNS_DIR:-$root/runs}" sweep)
layout() {  # layout STRATEGY N: the --set arguments of a strategy on N ranks ("" where it needs more)
  local n=$2 u=1
  case $1 in
    local) echo "parallel.ulysses=1 parallel.ring=1" ;;
    ulysses) echo "parallel.ulysses=$n parallel.ring=1" ;;
    ring) echo "parallel.ulysses=1 parallel.ring=$n" ;;
    hybrid)
      for ((d = 2; d * d <= n; d++)); do ((n % d == 0)) && u=$d; done
      ((u > 1)) && echo "parallel.ulysses=$u parallel.ring=$((n / u))" ;;
    *) echo "sweep.sh: unknown strategy '$1' (local, ulysses, ring, hybrid)" >&2; exit 2 ;;
  esac
}
{
  printf 'index\tranks\tseq_len\tstrategy\trepeat\tdeck\targs\n'
  i=0
  for n in ${ranks//,/ }; do
    for s in ${seq_lens//,/ }; do
      S=$s; [[ $scaling == weak ]] && S=$((s * n))
      for strategy in ${strategies//,/ }; do
        [[ $n == 1 && $strategy != local && $strategy != ulysses ]] && continue  # one rank: one layout
        args=$(layout "$strategy" "$n")
        [[ -n $args ]] || continue
        [[ $n == 1 ]] && strategy=local && args=$(layout local 1)
        for ((r = 0; r < repeats; r++)); do
          extra=""
          [[ $S == "$deck_S" ]] || extra=" reference.losses="  # another problem: no reference answer
          for kv in "${sets[@]}"; do extra+=" $kv"; done
          printf '%d\t%d\t%d\t%s\t%d\t%s\t%s\n' "$i" "$n" "$S" "$strategy" "$r" "$deck" "run.seq_len=$S $args$extra"
          i=$((i + 1))
        done
      done
    done
  done
} > "$sweep/points.tsv"
npoints=$(($(wc -l < "$sweep/points.tsv") - 1))
echo "sweep.sh: $npoints points ($scaling scaling) in $sweep"

point=$root/scripts/slurm/sweep_point.sbatch
case $mode in
  dry) ;;
  local)
    source "$root/scripts/env.sh"
    for ((i = 0; i < npoints; i++)); do
      SLURM_ARRAY_TASK_ID=$i LAUNCH=${LAUNCH:-"mpiexec --oversubscribe -n"} MINILST_ROOT=$root bash "$point" "$sweep" || true
    done
    ;;
  submit)
    # one array per rank count: its tasks ask for that many ranks
    for n in $(awk -F'\t' 'NR > 1 {print $2}' "$sweep/points.tsv" | sort -nu); do
      ids=$(awk -F'\t' -v n="$n" 'NR > 1 && $2 == n {printf "%s%s", sep, $1; sep = ","}' "$sweep/points.tsv")
      MINILST_ROOT=$root sbatch --parsable --job-name=minilst-sweep --ntasks="$n" --array="$ids" \
        --output="$sweep/point_%a.out" "${sbatch_opts[@]}" "$point" "$sweep" | sed "s/^/sweep.sh: submitted array job $n rank(s): /"
    done
    ;;
esac
echo "$sweep"
