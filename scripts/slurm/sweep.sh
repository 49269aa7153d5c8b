#!/usr/bin/env bash
# A sweep as Slurm job arrays: one array task per point (sequence length x rank
# count x attention strategy x repeat), one array per rank count (its tasks ask for
# that many ranks, 1 CPU each), all writing into one new sweep directory,
# runs/sweep_<deck stem>_<UTC>_<job or "local">_<pid>/ (RUNS_DIR to put it elsewhere;
# an installed tree: ./runs):
#   points.tsv            one line per point: index, ranks, seq_len, strategy, repeat, deck, the --set arguments
#   point_<i>/            point i: its metrics file (named by the program), minilst.log, environment.txt
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
# sbatch options after -- go to every array (they override the defaults --ntasks=<ranks>
# --cpus-per-task=1): --time, --partition, --cpus-per-task, --overcommit (more ranks
# than CPUs, e.g. 4 ranks on a 2-CPU node), ...
#
# Layouts: 1 rank runs one point per sequence length, `local`, whatever the strategies.
# On N ranks: local = N-way data parallel, ulysses = Ulysses N, ring = ring N, hybrid =
# Ulysses U x ring R = N with U <= R, U the largest such divisor >= 2. A point the deck
# cannot run is skipped before anything is written, with the reason: hybrid on a rank
# count that is not U x R with U, R >= 2 (2, 3, 5, ...), and every layout the program
# refuses (`minilst plan`: a Ulysses degree that does not divide the heads and kv-heads,
# ...). Before submitting, every array is checked with `sbatch --test-only`: a rank count
# Slurm can never run with these options (more tasks than the partition has CPUs, a
# partition that does not exist, ...) is skipped with sbatch's reason instead of being
# left PENDING. points.tsv lists only the points that run; it is written whole or not at all.
# Build first, on the login node (scripts/build.sh), or install miniLST: the jobs never
# build; the program is found by scripts/lib/minilst_program.sh. LAUNCH is the launcher
# the rank count is appended to (default "srun --mpi=pmix --unbuffered -n"; --local:
# "mpiexec --oversubscribe -n").
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/lib/minilst_program.sh"
source "$root/scripts/lib/unique_dir.sh"
source "$root/scripts/slurm/lib.sh"
check_slurm_ids sweep.sh || exit 2
deck=$root/inputs/scaling_cpu.yaml
sets=() seq_lens="" ranks="1,2,4" strategies="ulysses,ring" scaling=strong repeats=3 mode=submit sbatch_opts=()
usage() { echo "sweep.sh: $* (see the header of $0)" >&2; exit 2; }
if [[ $# -gt 0 && $1 != --* ]]; then
  [[ -f $1 ]] || usage "no deck $1"
  deck=$(realpath "$1"); shift
fi
while (($#)); do
  case $1 in
    --set | --seq-lens | --ranks | --strategies | --scaling | --repeats) (($# >= 2)) || usage "$1 needs a value" ;;
  esac
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
    *) usage "unknown argument '$1'" ;;
  esac
done
[[ -f $deck ]] || usage "no deck $deck"
[[ $scaling == strong || $scaling == weak ]] || usage "--scaling strong|weak"
[[ $repeats =~ ^[1-9][0-9]*$ ]] || usage "--repeats: a positive number, not '$repeats'"
[[ $ranks =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || usage "--ranks: positive numbers separated by commas, not '$ranks'"
[[ -z $seq_lens || $seq_lens =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  usage "--seq-lens: positive numbers separated by commas, not '$seq_lens'"
for strategy in ${strategies//,/ }; do
  case $strategy in local | ulysses | ring | hybrid) ;; *) usage "unknown strategy '$strategy' (local, ulysses, ring, hybrid)" ;; esac
done
[[ -n ${strategies//,/} ]] || usage "--strategies: at least one of local, ulysses, ring, hybrid"
for kv in "${sets[@]}"; do
  [[ $kv != *[[:space:]]* ]] || usage "--set '$kv': a sweep's --set values may not contain spaces"
done
exe=$(minilst_program "$root") || exit 2
stem=$(deck_stem "$deck")
# the deck's own S, as the program resolves it (its reference losses hold at that S only)
set_args=()
for kv in "${sets[@]}"; do set_args+=(--set "$kv"); done
deck_S=$("$exe" plan "$deck" --set parallel.ulysses=1 --set parallel.ring=1 "${set_args[@]}" --format json --ranks 1 2> /dev/null |
         sed -n 's/.*"seq_len": \([0-9]*\).*/\1/p' || true)
[[ -n $deck_S ]] || deck_S=$(sed -n 's/^ *seq_len: *\([0-9]*\).*/\1/p' "$deck" | head -1)
[[ -n $seq_lens ]] || seq_lens=$deck_S
[[ -n $seq_lens ]] || usage "no run.seq_len in $deck: give --seq-lens"

layout_args="" layout_why=""
layout() {  # layout STRATEGY N: sets layout_args (the --set arguments), or layout_why and returns 1
  local n=$2 d u=0
  layout_args="" layout_why=""
  case $1 in
    local) layout_args="parallel.ulysses=1 parallel.ring=1" ;;
    ulysses) layout_args="parallel.ulysses=$n parallel.ring=1" ;;
    ring) layout_args="parallel.ulysses=1 parallel.ring=$n" ;;
    hybrid)
      for ((d = 2; d * d <= n; d++)); do
        if ((n % d == 0)); then u=$d; fi
      done
      if ((u == 0)); then
        layout_why="hybrid needs U x R ranks with U, R >= 2 (4, 6, 8, 9, ...), and $n is not such a product"
        return 1
      fi
      layout_args="parallel.ulysses=$u parallel.ring=$((n / u))" ;;
  esac
}

# The points, checked with the program: "ranks<TAB>seq_len<TAB>strategy<TAB>repeat<TAB>args"
points=() skipped=0
declare -A said=()
skip() {  # skip MESSAGE: a layout skipped, said once
  skipped=$((skipped + 1))
  [[ -n ${said[$1]:-} ]] || echo "sweep.sh: skipped $1" >&2
  said[$1]=1
}
for n in ${ranks//,/ }; do
  for s in ${seq_lens//,/ }; do
    S=$s
    [[ $scaling == weak ]] && S=$((s * n))
    here=${strategies//,/ }
    ((n > 1)) || here=local  # one rank: one layout, the baseline every strategy shares
    for strategy in $here; do
      if ! layout "$strategy" "$n"; then
        skip "$strategy on $n rank(s): $layout_why"
        continue
      fi
      args="run.seq_len=$S $layout_args"
      [[ $S == "$deck_S" ]] || args+=" reference.losses="  # another problem: no reference answer
      for kv in "${sets[@]}"; do args+=" $kv"; done
      plan_args=()
      for kv in $args; do plan_args+=(--set "$kv"); done
      why=$("$exe" plan "$deck" --ranks "$n" "${plan_args[@]}" --format json 2>&1 > /dev/null) && rc=0 || rc=$?
      if ((rc != 0)); then
        why=$(grep -v '^$' <<< "$why" | tail -1)
        skip "$strategy on $n rank(s), S = $S ($args): the program refuses it: ${why#error: }"
        continue
      fi
      for ((r = 0; r < repeats; r++)); do points+=("$n"$'\t'"$S"$'\t'"$strategy"$'\t'"$r"$'\t'"$args"); done
    done
  done
done

point=$root/scripts/slurm/sweep_point.sbatch
rank_counts() { for p in "${points[@]}"; do echo "${p%%$'\t'*}"; done | sort -nu; }
count_of() { local p c=0; for p in "${points[@]}"; do [[ ${p%%$'\t'*} == "$1" ]] && c=$((c + 1)); done; echo "$c"; }
submit_opts() {  # submit_opts N: the sbatch options of the array of N-rank points
  echo "--job-name=sweep_${stem}_${1}r --ntasks=$1 --cpus-per-task=1"
}
if [[ $mode == submit && ${#points[@]} -gt 0 ]]; then
  command -v sbatch > /dev/null || usage "no sbatch here: run the points with --local, or only write them with --dry-run"
  # a rank count Slurm can never run (more tasks than the partition's CPUs, a bad option) is
  # refused by --test-only at once, where a real submission may stay PENDING forever
  for n in $(rank_counts); do
    read -r -a opts <<< "$(submit_opts "$n")"
    if ! why=$(sbatch --test-only "${opts[@]}" --array="0-$(($(count_of "$n") - 1))" "${sbatch_opts[@]}" \
                 "$point" /nonexistent 2>&1); then
      why=$(grep -v '^$' <<< "$why" | tail -1)
      echo "sweep.sh: skipped the $n-rank points: Slurm cannot run $n task(s) with ${opts[*]:1} ${sbatch_opts[*]}: $why" \
           "(see: sbatch --test-only ${opts[*]:1} ${sbatch_opts[*]} --wrap true; fewer --ranks, another partition," \
           "or -- --overcommit to run more ranks than CPUs)" >&2
      skipped=$((skipped + 1))
      kept=()
      for p in "${points[@]}"; do [[ ${p%%$'\t'*} == "$n" ]] || kept+=("$p"); done
      points=("${kept[@]}")
    fi
  done
fi
if ((${#points[@]} == 0)); then
  echo "sweep.sh: no point to run (the reasons are above): nothing written" >&2
  exit 1
fi

sweep=$(unique_dir "$(minilst_runs_dir "$root")" "sweep_$stem")
sweep=$(cd "$sweep" && pwd)
{
  printf 'index\tranks\tseq_len\tstrategy\trepeat\tdeck\targs\n'
  i=0
  for p in "${points[@]}"; do
    IFS=$'\t' read -r n S strategy r args <<< "$p"
    printf '%d\t%d\t%d\t%s\t%d\t%s\t%s\n' "$i" "$n" "$S" "$strategy" "$r" "$deck" "$args"
    i=$((i + 1))
  done
} > "$sweep/points.tsv.partial"
mv "$sweep/points.tsv.partial" "$sweep/points.tsv"  # whole or not at all
npoints=${#points[@]}
note=""
((skipped == 0)) || note="; some skipped, see above"
echo "sweep.sh: $npoints point(s) ($scaling scaling$note) in $sweep"

export MINILST=$exe MINILST_ROOT=$root  # the points run the program they were checked with
status=0
case $mode in
  dry) ;;
  local)
    source "$root/scripts/env.sh"
    stop=""
    trap 'stop=1' INT TERM  # Ctrl-C: the point running stops cleanly (exit 4), no further point starts
    for ((i = 0; i < npoints; i++)); do
      [[ -z $stop ]] || { echo "sweep.sh: stopped: points $i.. not run" >&2; status=4; break; }
      SLURM_ARRAY_TASK_ID=$i LAUNCH=${LAUNCH:-$MINILST_LAUNCH} bash "$point" "$sweep" || true
    done
    trap - INT TERM
    ;;
  submit)
    # one array per rank count: its tasks ask for that many ranks
    for n in $(awk -F'\t' 'NR > 1 {print $2}' "$sweep/points.tsv" | sort -nu); do
      ids=$(awk -F'\t' -v n="$n" 'NR > 1 && $2 == n {printf "%s%s", sep, $1; sep = ","}' "$sweep/points.tsv")
      read -r -a opts <<< "$(submit_opts "$n")"
      if ! sbatch --parsable "${opts[@]}" --array="$ids" --output="$sweep/point_%a.out" "${sbatch_opts[@]}" \
           "$point" "$sweep" | sed "s/^/sweep.sh: submitted array job $n rank(s): /"; then
        echo "sweep.sh: the $n-rank array was not submitted: its points ($ids) will not run" >&2
        status=1
      fi
    done
    ;;
esac
echo "$sweep"
exit $status
