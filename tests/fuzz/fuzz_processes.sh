#!/usr/bin/env bash
# Fuzzing what needs processes: signals at random moments (one or two, of every
# kind a job may get) to a run or a plan, and 2-rank jobs whose ranks were given
# different command lines. Every case must end within its limit with an exit code
# below 128 that says what happened, leave no .partial file, and keep the finished
# steps: exit 4 means a metrics file with complete = false; exit 0 a complete one.
#   tests/fuzz/fuzz_processes.sh CASES [SEED]
# Environment: MINILST, MINILST_SOURCE, PYTHON (ctest sets them); MPIEXEC.
source "$(dirname "$0")/../app/common.sh"
set +e  # every case is checked explicitly
cases=${1:-20} seed=${2:-1}
RANDOM=$seed
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
deck=$MINILST_SOURCE/inputs/tiny.yaml
signals=(TERM INT HUP QUIT USR1 USR2 PIPE)
words=(--bogus --set run.steps=3 --set run.steps=4 plan keys --help --version --kokkos-threads=2 --kokkos-x=1 "")
failures=0 failures_before=0
fail() { echo "FAIL case $1: $2"; failures=$((failures + 1)); }
start() {  # start LIMIT_S COMMAND...: runs it in the background ($pid), SIGKILLed (exit 137) past LIMIT_S
  local limit=$1
  shift
  "$@" &
  pid=$!
  (sleep "$limit"; kill -KILL $pid 2> /dev/null) &
  killer=$!
}
finish() {  # the exit code of $pid (137: it hung past its limit)
  wait $pid
  rc=$?
  kill $killer 2> /dev/null
  wait $killer 2> /dev/null
}

check_outputs() {  # check_outputs CASE RC H5
  if compgen -G "$3*.partial" > /dev/null; then fail "$1" "a .partial file is left"; fi
  case $2 in
    0) "$PYTHON" -c "import h5py,sys; sys.exit(h5py.File('$3')['/'].attrs['complete'] != 'true')" 2> /dev/null ||
         fail "$1" "exit 0 without a complete metrics file" ;;
    4) "$PYTHON" -c "import h5py,sys; f=h5py.File('$3'); sys.exit(not (f.attrs['complete'] == 'false' and f.attrs['steps_done'] >= 1))" \
         2> /dev/null || fail "$1" "exit 4 without the finished steps" ;;
  esac
}

for ((c = 1; c <= cases; ++c)); do
  kind=$((RANDOM % 3)) sig=${signals[RANDOM % ${#signals[@]}]} delay=0.$((2 + RANDOM % 8)) twice=$((RANDOM % 3 == 0))
  h5=case_$c.h5
  case $kind in
    0)  # a run, signalled
      start 120 "$MINILST" run "$deck" --set run.steps=400 --set output.metrics=$h5 > case_$c.log 2>&1
      sleep "$delay"
      kill -s "$sig" $pid 2> /dev/null
      what="run, SIG$sig after ${delay}s"
      if ((twice)); then
        sleep 0.0$((RANDOM % 9))
        kill -s "$sig" $pid 2> /dev/null
        what+=", twice"
      fi
      finish
      if [[ $sig == INT ]] && ((twice)); then  # Ctrl-C twice ends the process at once, by design
        ((rc < 128 || rc == 130)) || fail $c "$what: exit $rc"
      else
        ((rc < 128)) || fail $c "$what: exit $rc"
      fi
      check_outputs $c $rc $h5 ;;
    1)  # a plan, signalled (it ends at once, exit 4, or has answered: 0)
      start 60 "$MINILST" plan "$deck" --max-seq-len --device-mib 4096 > case_$c.log 2>&1
      sleep "$delay"
      kill -s "$sig" $pid 2> /dev/null
      finish
      what="plan, SIG$sig after ${delay}s"
      [[ $rc == 0 || $rc == 4 ]] || fail $c "$what: exit $rc" ;;
    2)  # two ranks, the second given other words
      extra=${words[RANDOM % ${#words[@]}]}
      start 60 "${MPIEXEC:-mpiexec}" -n 1 "$MINILST" run "$deck" --set run.steps=2 --set output.metrics=$h5 : \
        -n 1 "$MINILST" run "$deck" --set run.steps=2 --set output.metrics=$h5 $extra > case_$c.log 2>&1
      finish
      what="2 ranks, the second with '$extra'"
      if [[ -z $extra ]]; then [[ $rc == 0 ]] || fail $c "$what: exit $rc"
      else [[ $rc == 2 ]] && grep -q "differs between ranks" case_$c.log || fail $c "$what: exit $rc"; fi ;;
  esac
  echo "case $c: $what: exit $rc"
  if ((failures > failures_before)); then tail -5 case_$c.log; fi
  failures_before=$failures
  rm -f "$h5"
done
echo "fuzz_processes: $cases cases (seed $seed), $failures failure(s)"
((failures == 0))
