#!/usr/bin/env bash
# Batch jobs keep every finished step however Slurm stops them, with the shipped
# template and LAUNCH=mpiexec (tests/slurm/local_slurm.sh: a private Slurm on localhost,
# Slurm's default KillWait of 30 s; skipped, exit 77, where it cannot start). Four jobs at once:
#  1. limit:   --time=1, far more steps than fit, the template's early warning moved to the
#              last second: miniLST reads the job's end time (squeue) and stops before it;
#  2. cancel:  scancel'led after step 3 (SIGTERM to every process, SIGKILL 30 s later): the
#              RESULT line in the log and the job's exit code 4:0 (mpirun itself answers 1);
#  3. shorten: --time=10, cut to 1 minute with `scontrol update` after step 3 (the template's
#              --signal=B:USR1@90 then warns at once);
#  4. shared:  `sbatch -O -n 4`, more ranks than the node's CPUs: a VALID run, not reportable,
#              the shared core named.
# Each of the first three must leave its metrics file (the one the RESULT line names, named by
# the program) with complete = false holding every step its log printed (and the one a dropped
# log line may hide), an INCOMPLETE RESULT line in the log, and Slurm's record (scontrol show
# job: no slurmdbd here, so no sacct) TIMEOUT, CANCELLED or exit code 4.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/../app/common.sh"
source "$(dirname "$0")/local_slurm.sh"
source "$MINILST_SOURCE/scripts/slurm/lib.sh"  # metrics_file
start_local_slurm
export LAUNCH="mpiexec --oversubscribe"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
template=$MINILST_SOURCE/scripts/slurm/minilst.sbatch
template_sum=$(sha256sum < "$template")
long=(--set run.steps=100000 --set run.seq_len=256 --set run.warmup_steps=1 --set reference.losses=)
opts=(--parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1)

submit() {  # submit NAME TIME [SBATCH OPTION]: the job id; its run directory is $tmp/runs_NAME
  RUNS_DIR=$tmp/runs_$1 sbatch "${opts[@]}" --time="$2" "${@:3}" --output="$tmp/$1.out" "$template" \
    "$MINILST_SOURCE/inputs/default.yaml" "${long[@]}"
}
log_of() { ls "$tmp"/runs_"$1"/default_*/minilst.log 2> /dev/null | head -1 || true; }
wait_for_step() {  # wait_for_step NAME N: until the job's log shows step N (at most 180 s)
  for _ in $(seq 1800); do
    local log
    log=$(log_of "$1")
    [[ -n $log ]] && grep -qE "^step +$2/" "$log" && return 0
    sleep 0.1
  done
  echo "FAIL: job $1 never reached step $2"; cat "$tmp/$1.out"; exit 1
}
job_field() { scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
wait_for_end() {  # wait_for_end ID: until the job left the queue (at most 240 s)
  for _ in $(seq 240); do
    case $(job_field "$1" JobState) in PENDING | RUNNING | COMPLETING | CONFIGURING | "") sleep 1 ;; *) return 0 ;; esac
  done
  echo "FAIL: job $1 still $(job_field "$1" JobState) after 240 s"; exit 1
}

limit=$(submit limit 1 --signal=B:USR1@1)  # no early warning: miniLST's own reading of the end time stops it
cancel=$(submit cancel 10)
shorten=$(submit shorten 10)
shared=$(RUNS_DIR=$tmp/runs_shared sbatch --parsable -O -n 4 --time=10 --output="$tmp/shared.out" "$template" \
  "$MINILST_SOURCE/inputs/tiny.yaml" --set run.steps=3 --set parallel.ring=4)
wait_for_step cancel 3
scancel "$cancel"
wait_for_step shorten 3
scontrol update JobId="$shorten" TimeLimit=1
for id in "$limit" "$cancel" "$shorten" "$shared"; do wait_for_end "$id"; done

status=0
state=$(job_field "$shared" JobState) code=$(job_field "$shared" ExitCode)
log=$(ls "$tmp"/runs_shared/tiny_*/minilst.log 2> /dev/null | head -1 || true)
echo "== shared: job $shared $state, exit code $code"
grep -E "^RESULT" "$log" || { echo "FAIL: no RESULT line"; cat "$tmp/shared.out"; status=1; }
[[ $state:$code == COMPLETED:0:0 ]] || { echo "FAIL: Slurm recorded $state $code"; status=1; }
grep -Eq "^RESULT: VALID .* ranks=4 .*reportable=no \(.*ranks share a CPU core \(core [0-9]+ on " "$log" \
  || { echo "FAIL: four ranks on fewer CPUs are reportable, or the shared core is not named"; status=1; }
for name in limit cancel shorten; do
  id=${!name}
  state=$(job_field "$id" JobState) code=$(job_field "$id" ExitCode)
  log=$(log_of "$name")
  dir=$(dirname "$log")
  printed=$(grep -cE '^step +[0-9]+/' "$log" || true)
  echo "== $name: job $id $state, exit code $code, $printed step(s) printed; $(grep -E '^stopping' "$log" || echo 'no stopping line')"
  grep -E "^RESULT" "$log" || true
  case $name:$state:$code in
    cancel:CANCELLED:4:0) ;;  # the run's own code: the template outlives mpirun within KillWait
    cancel:*) echo "FAIL: Slurm recorded $state $code, expected CANCELLED with exit code 4:0"; status=1 ;;
    *:TIMEOUT:* | *:CANCELLED:* | *:*:4:0) ;;
    *) echo "FAIL: Slurm recorded $state $code"; status=1 ;;
  esac
  grep -q "^RESULT: INCOMPLETE" "$log" || { echo "FAIL: no INCOMPLETE RESULT line in the log"; status=1; }
  metrics=$(metrics_file "$dir" "$log" "$MINILST") || { echo "FAIL: no metrics file in $dir: $(ls "$dir")"; status=1; }
  "$PYTHON" - "$metrics" "$printed" <<'PY' || status=1
import sys, h5py
path, printed = sys.argv[1], int(sys.argv[2])
try:
    f = h5py.File(path, "r")
except OSError as e:
    sys.exit(f"FAIL: {path}: {e}")
done = int(f.attrs["steps_done"])
print(f"  {path}: complete={f.attrs['complete']} steps_done={done} reason='{f.attrs['stop_reason']}'")
ok = f.attrs["complete"] == "false" and done >= 1 and done >= printed and done == f["loss"].shape[0]
sys.exit(0 if ok else "FAIL: not every finished step is in the file")
PY
done
[[ $(sha256sum < "$template") == "$template_sum" ]] || { echo "FAIL: the template changed"; status=1; }
((status == 0)) && echo PASSED
exit $status
