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

# check_slurm_ids NAME: returns 2, with NAME's message, when SLURM_JOB_ID, SLURM_ARRAY_JOB_ID
# or SLURM_ARRAY_TASK_ID holds characters other than letters, digits, '.', '_' and '-' (Slurm
# sets numbers): they name the run's directory and files, so a '/' or a space must never reach one.
check_slurm_ids() {
  local name value
  for name in SLURM_JOB_ID SLURM_ARRAY_JOB_ID SLURM_ARRAY_TASK_ID; do
    value=${!name:-}
    [[ -z $value || $value =~ ^[A-Za-z0-9._-]+$ ]] && continue
    echo "$1: $name='$value' holds characters other than A-Za-z0-9._- (it names the run's files): refused" >&2
    return 2
  done
}

# launcher_lingers PID: true when PID is Open MPI's mpirun (mpirun, mpiexec, orterun, prterun)
# and every process it started has exited (its local ranks, or the agents of remote ones: none
# left, or only zombies it has not reaped): what is left is mpirun's own wait, which an abort
# (SIGTERM) stretches past Slurm's KillWait. False for any other launcher (srun's tasks are not
# its children), or without ps.
launcher_lingers() {
  local comm states
  comm=$(cat /proc/"$1"/comm 2> /dev/null) || return 1
  case $comm in mpirun | mpiexec | orterun | prterun) ;; *) return 1 ;; esac
  command -v ps > /dev/null || return 1
  states=$(ps -o stat= --ppid "$1" 2> /dev/null || true)  # ps exits 1 when it selects none
  [[ -z $states ]] || ! grep -qv '^Z' <<< "$states"
}
