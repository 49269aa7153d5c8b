# shellcheck shell=bash
# Sourced by the scripts. unique_dir PARENT NAME creates and prints a directory
# PARENT/NAME_<UTC time>_<Slurm job id or "local">[_<array task>]_<pid>, created
# exclusively (mkdir, not mkdir -p: when it exists, _1, _2, ... are tried), so two
# runs or sweeps started in the same second never share a directory. NAME says what
# runs there (the batch template: the deck's stem, e.g. runs/default_...; a sweep:
# sweep_<deck stem>); characters other than letters, digits, '.', '_' and '-' become '_'.
unique_dir() {
  local parent=$1 name=${2//[^A-Za-z0-9._-]/_} tag n=0 dir
  tag="$(date -u +%Y%m%dT%H%M%SZ)_${SLURM_JOB_ID:-local}"
  [[ -z ${SLURM_ARRAY_TASK_ID:-} ]] || tag+="_${SLURM_ARRAY_TASK_ID}"
  tag+="_$$"
  mkdir -p "$parent"
  dir="$parent/${name}_$tag"
  until mkdir "$dir" 2> /dev/null; do
    n=$((n + 1))
    ((n < 1000)) || { echo "unique_dir: cannot create a directory in $parent" >&2; return 1; }
    dir="$parent/${name}_${tag}_$n"
  done
  echo "$dir"
}
