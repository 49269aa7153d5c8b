# shellcheck shell=bash
# Sourced by the Slurm scripts (minilst.sbatch, sweep_point.sbatch, sweep.sh).

# deck_stem DECK prints the deck's file name without its directory and .yaml/.yml:
# the first part of a run's directory name (runs/<stem>_<UTC>_<job>_<pid>/).
deck_stem() {
  local stem
  stem=$(basename "$1")
  stem=${stem%.yaml}
  stem=${stem%.yml}
  echo "${stem:-deck}"
}

# metrics_file DIR LOG EXE prints the metrics file of the run that ran in DIR with
# its output in LOG: the path in the last RESULT line's metrics= field (relative
# to DIR), else the one *.h5 file in DIR that `EXE result` reads as a metrics
# file (a tensor dump is not one). Prints nothing (and returns 1) when there is
# none, or more than one with no RESULT line to tell them apart.
metrics_file() {
  local dir=$1 log=$2 exe=$3 path f rc found=()
  path=$(sed -n 's/^RESULT: .* metrics=\(.*\)$/\1/p' "$log" 2> /dev/null | tail -1 || true)
  if [[ -n $path ]]; then
    [[ $path == /* ]] || path=$dir/$path
    if [[ -f $path ]]; then
      echo "$path"
      return 0
    fi
  fi
  for f in "$dir"/*.h5; do
    [[ -f $f ]] || continue
    rc=0
    "$exe" result "$f" > /dev/null 2>&1 || rc=$?
    ((rc == 2)) || found+=("$f")  # 2: not a metrics file (a dump, another program's file)
  done
  ((${#found[@]} == 1)) || return 1
  echo "${found[0]}"
}

# result_check LOG N NAME: a warning when the RESULT line of LOG says another rank
# count than N, named NAME in the warning (SLURM_NTASKS in a job: the launcher did
# not wire up MPI, or ran another count); nothing when there is no RESULT line (a
# deck refused before any work prints none).
result_check() {
  local line
  line=$(grep -m1 '^RESULT' "$1" 2> /dev/null || true)
  [[ -n $line ]] || return 0
  [[ $line == *" ranks=$2 "* ]] || echo "WARNING: ranks in RESULT differ from $3=$2: $line"
}
