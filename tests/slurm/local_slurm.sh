# Sourced by the Slurm test: a private, single-node Slurm (munged, slurmctld,
# slurmd) on localhost, in the scratch directory $tmp, as root, on its own ports.
# start_local_slurm [SLURM.CONF LINE...] exits 77 (ctest: skipped) with the reason where it
# cannot run; its arguments are added to the configuration.
# SLURM_CONF points the clients (sbatch, squeue, sacct) at it.
skip() { echo "skipped: $*"; exit 77; }

start_local_slurm() {
  [[ $(id -u) -eq 0 ]] || skip "a private slurmd needs root"
  for p in munged slurmctld slurmd sbatch squeue; do command -v "$p" > /dev/null || skip "no $p (Debian: slurmctld slurmd slurm-client munge)"; done
  local s=$tmp/slurm
  mkdir -p "$s"/{state,spool,log,munge}
  trap 'stop_local_slurm; rm -rf "$tmp"' EXIT  # also when a later step skips
  chmod 700 "$s/munge"
  dd if=/dev/urandom of="$s/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$s/munge/munge.key"
  munged --force --key-file="$s/munge/munge.key" --socket="$s/munge/munge.sock" --pid-file="$s/munge/munged.pid" \
    --log-file="$s/log/munged.log" --seed-file="$s/munge/seed" || skip "munged does not start: $(tail -3 "$s/log/munged.log" 2>/dev/null)"
  local cpus port=$((20000 + RANDOM % 20000))
  cpus=$(getconf _NPROCESSORS_ONLN)
  cat > "$s/slurm.conf" <<CONF
ClusterName=minilst-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$s/munge/munge.sock
CredType=cred/munge
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$s/state
SlurmdSpoolDir=$s/spool
SlurmctldPidFile=$s/slurmctld.pid
SlurmdPidFile=$s/slurmd.pid
SlurmctldLogFile=$s/log/slurmctld.log
SlurmdLogFile=$s/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
KillWait=30  # Slurm's default: SIGKILL 30 s after the SIGTERM of a time limit or scancel
NodeName=localhost CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  printf '%s\n' "$@" >> "$s/slurm.conf"
  export SLURM_CONF=$s/slurm.conf
  slurmctld -f "$SLURM_CONF" || skip "slurmctld does not start: $(tail -3 "$s/log/slurmctld.log" 2>/dev/null)"
  slurmd -f "$SLURM_CONF" -N localhost || skip "slurmd does not start: $(tail -3 "$s/log/slurmd.log" 2>/dev/null)"
  for _ in $(seq 60); do
    sinfo -h -o %T 2> /dev/null | grep -Eq '^idle' && return 0
    sleep 1
  done
  skip "the node never became idle: $(sinfo 2>&1 | tail -2); $(tail -3 "$s/log/slurmd.log")"
}

stop_local_slurm() {
  local s=$tmp/slurm
  for f in slurmd.pid slurmctld.pid munge/munged.pid; do
    [[ -f $s/$f ]] && kill "$(cat "$s/$f")" 2> /dev/null || true
  done
  sleep 1
}
