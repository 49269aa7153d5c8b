#!/usr/bin/env bash
# A run's output files are its own, and its finished steps survive SIGKILL (docs/metrics.md,
# "Who owns an output"):
#  1. two runs started together with the same output name, with and without flushes, on 1
#     and 2 ranks: one runs (exit 0, every step in the file, the file is its own), the other
#     is refused before any work (exit 2) naming the run that holds the name (host, pid);
#  2. an existing file of another user in a sticky directory, and an immutable file
#     (chattr +i): exit 2 before step 1, naming the file and the reason, the file untouched;
#  3. a file put at the metrics (2 ranks), JSON or dump name during the run: untouched; the
#     run's files go to the sibling name (m.<host>-<pid>.h5) that the RESULT line and the log name;
#  4. SIGKILL to every rank with output.flush_seconds very short: the file holds every step up
#     to the last flush, whole; the next run takes over the stale lock.
# OWNERSHIP_TRIALS (default 1): how many times each pair of case 1 runs.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON, MPIEXEC.
source "$(dirname "$0")/common.sh"
deck=$MINILST_SOURCE/inputs/tiny.yaml
trials=${OWNERSHIP_TRIALS:-1}
host=$(hostname)
fail() { echo "FAIL: $*"; exit 1; }

run_on() {  # run_on RANKS: the command that runs the deck on RANKS ranks (1: no launcher), in ${run[@]}
  run=("$MINILST" run "$deck")
  (($1 == 1)) || run=("${MPIEXEC:-mpiexec}" --oversubscribe -n "$1" "${run[@]}")
}
h5_steps() {  # h5_steps FILE: "<steps_done> <complete> <number of losses> <last loss>"
  "$PYTHON" -c '
import sys, h5py
f = h5py.File(sys.argv[1], "r")
loss = f["loss"][()]
print(int(f.attrs["steps_done"]), f.attrs["complete"], len(loss), "%.6f" % loss[-1])' "$1"
}
result_file() { sed -n 's/^RESULT: .* metrics=\(.*\)$/\1/p' "$1"; }
no_step_ran() { ! grep -qE "^step +1/" "$1"; }

echo "== 1. two runs, one name"
for ranks in 1 2; do
  for flush in 0 0.05; do
    for trial in $(seq "$trials"); do
      name=pair_${ranks}_${flush}_$trial
      args=(--set run.steps=150 --set output.flush_seconds=$flush --set output.metrics=$name.h5)
      run_on "$ranks"
      "${run[@]}" "${args[@]}" --set run.seed=1 > "$name.a.log" 2>&1 & a=$!
      "${run[@]}" "${args[@]}" --set run.seed=2 > "$name.b.log" 2>&1 & b=$!
      rc_a=0; wait $a || rc_a=$?
      rc_b=0; wait $b || rc_b=$?
      echo "$ranks rank(s), flush_seconds $flush: exit codes $rc_a $rc_b"
      [[ "$rc_a $rc_b" == "0 2" || "$rc_a $rc_b" == "2 0" ]] || { cat "$name".*.log; fail "expected one run to finish and one refused"; }
      won=$name.a.log lost=$name.b.log winner=$a
      ((rc_a == 0)) || { won=$name.b.log; lost=$name.a.log; winner=$b; }
      pid='[0-9]*'
      ((ranks > 1)) || pid=$winner  # without a launcher the run's pid is the process started here
      grep -q "is being written by another miniLST run (host $host, pid $pid," "$lost" || { cat "$lost"; fail "the refusal names no run"; }
      no_step_ran "$lost" || fail "the refused run ran a step"
      read -r done complete nloss last < <(h5_steps "$name.h5")
      final=$(sed -n 's/^RESULT: .* final_loss=\([0-9.]*\) .*/\1/p' "$won")
      [[ $done == 150 && $complete == true && $nloss == 150 && $last == "$final" ]] ||
        fail "$name.h5: $done steps, complete $complete, last loss $last; the run that finished said $final"
      [[ ! -e $name.h5.lock ]] || fail "the lock is left after the run"
    done
  done
done

echo "== 2. a file that must not be replaced"
if [[ $(id -u) == 0 ]]; then
  mkdir -m 1777 sticky
  echo "another user's notes" > sticky/m.h5
  chown 4242:4242 sticky/m.h5
  rc=0; "$MINILST" run "$deck" --set output.metrics=sticky/m.h5 --set output.overwrite=true > sticky.log 2>&1 || rc=$?
  grep error sticky.log
  ((rc == 2)) && grep -q "'sticky/m.h5' belongs to user .* in the sticky directory" sticky.log && no_step_ran sticky.log ||
    fail "a foreign file in a sticky directory: exit $rc"
  [[ $(cat sticky/m.h5) == "another user's notes" ]] || fail "the foreign file was touched"
else
  echo "SKIPPED: a file of another user needs root to create (chown)"
fi
"$MINILST" run "$deck" --set output.metrics=frozen.h5 > /dev/null 2>&1
if chattr +i frozen.h5 2> /dev/null; then
  rc=0; "$MINILST" run "$deck" --set output.metrics=frozen.h5 > frozen.log 2>&1 || rc=$?
  chattr -i frozen.h5
  grep error frozen.log
  ((rc == 2)) && grep -q "'frozen.h5' is immutable" frozen.log && no_step_ran frozen.log || fail "an immutable file: exit $rc"
else
  echo "SKIPPED: chattr +i is not allowed here (it needs CAP_LINUX_IMMUTABLE and a file system with attributes)"
fi

echo "== 3. a file put at an output's name during the run"
wait_for() { for _ in $(seq 3000); do [[ -e $1 ]] && return 0; sleep 0.01; done; fail "no $1"; }
taken_run() {  # taken_run NAME RANKS WAIT_FOR ACTION...: ACTION once WAIT_FOR exists; the run must end VALID
  local name=$1 ranks=$2 appears=$3
  shift 3
  run_on "$ranks"
  "${run[@]}" --set run.steps=200 --set output.flush_seconds=0.05 --set output.metrics=$name.h5 \
    --set output.dump=$name.dump.h5 > "$name.log" 2>&1 & local started=$!
  wait_for "$appears"
  "$@"
  wait $started || { cat "$name.log"; fail "$name: exit $?"; }
  grep -E "^warning|RESULT" "$name.log" | cut -c1-220
}
check_sibling() {  # check_sibling NAME: the RESULT line names NAME.<host>-<pid>.h5, whole, with every step
  local file
  file=$(result_file "$1.log")
  [[ $file =~ ^$1\.[A-Za-z0-9_-]+-[0-9]+\.h5$ ]] || fail "$1: RESULT names '$file', not a sibling"
  grep -q "metrics go to '$file'" "$1.log" || fail "$1: the log does not name '$file'"
  read -r done complete _ _ < <(h5_steps "$file")
  [[ $done == 200 && $complete == true && -e ${file%.h5}.json ]] || fail "$file: $done steps, complete $complete"
}
users_file() { echo "$2" > "$1.user"; mv "$1.user" "$1"; }  # a new file at that name
write_over() { echo "$2" > "$1"; }                            # the file there written over in place

taken_run metrics 2 metrics.json users_file metrics.h5 "the user's metrics"
[[ $(cat metrics.h5) == "the user's metrics" ]] || fail "the user's file at the metrics name was touched"
check_sibling metrics
taken_run summary 1 summary.json write_over summary.json "the user's summary"
[[ $(cat summary.json) == "the user's summary" ]] || fail "the user's file at the JSON name was touched"
check_sibling summary
[[ ! -e summary.h5 ]] || fail "this run's earlier snapshot at summary.h5 is left"
taken_run dump 1 dump.h5.lock users_file dump.dump.h5 "the user's dump"
[[ $(cat dump.dump.h5) == "the user's dump" ]] || fail "the user's file at the dump name was touched"
if grep -q "^tensor dump" dump.log && ! grep -q "the dump goes to\|the dump is written to" dump.log; then
  echo "(the dump was written before the user's file appeared: nothing to check)"
else
  ls dump.dump.*-*.h5 > /dev/null || fail "no sibling dump"
fi

echo "== 4. SIGKILL to every rank, flushing after every step"
"${MPIEXEC:-mpiexec}" --oversubscribe -n 2 "$MINILST" run "$deck" --set run.steps=100000 --set output.flush_seconds=0.001 \
  --set output.metrics=killed.h5 > killed.log 2>&1 & launcher=$!
for _ in $(seq 1200); do grep -qE "^step +30/" killed.log && break; sleep 0.05; done
ranks=$(pgrep -f -- "output.metrics=killed.h5" | while read -r p; do [[ $(cat /proc/"$p"/comm 2> /dev/null) == minilst ]] && echo "$p"; done)
kill -KILL $ranks
last=$(grep -cE "^step " killed.log)
wait $launcher || true
read -r done complete nloss _ < <(h5_steps killed.h5)
echo "last step printed: $last; the file: $done steps, complete $complete"
((done >= last - 1 && nloss == done)) && [[ $complete == false ]] || fail "steps lost: $done in the file, $last printed"
[[ -e killed.h5.lock ]] || fail "no lock left by the killed run"
rc=0; "$MINILST" run "$deck" --set output.metrics=killed.h5 > after.log 2>&1 || rc=$?
((rc == 0)) && grep -q "removed the stale lock 'killed.h5.lock'" after.log || { cat after.log; fail "the stale lock was not taken over"; }
[[ -z $(ls killed.h5.*.partial 2> /dev/null) ]] || fail "temporary files of the killed run are left"
echo PASSED
