#!/usr/bin/env bash
# benchmarks/jube/run.sh (the JUBE spec benchmarks/jube/minilst.yaml) as Slurm jobs on a private
# localhost Slurm (tests/slurm/local_slurm.sh), with references written here for this host:
#  1. passing: inputs/tiny.yaml on 1 rank (local) and 2 ranks (Ulysses), references far below any
#     machine's FOM, launched by the spec's own default launcher on a Slurm whose MpiDefault is none
#     (the 2-rank job is one MPI job only where the launcher names the PMI plugin): both VALID, both
#     checks PASS, run.sh exits 0, the table names each point;
#  2. failing: tiny with its reference set impossibly high (FOM below it beyond the tolerance) and the
#     default deck with a wrong seed (its reference answer not reproduced: INVALID): run.sh exits 1,
#     each row FAIL with its own reason;
#  3. check_result.py alone: a system with no reference fails, naming what is missing.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
source "$MINILST_SOURCE/tests/slurm/local_slurm.sh"
command -v jube > /dev/null || skip "no jube (Debian: jube; scripts/setup.sh installs it)"
start_local_slurm
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export MINILST MINILST_SYSTEM=testhost MINILST_TIME=5
grep -qx "MpiDefault=none" "$SLURM_CONF" || { echo "FAIL: the test Slurm does not set MpiDefault=none"; exit 1; }
bench=$MINILST_SOURCE/benchmarks/jube
fail() { echo "FAIL: $*"; exit 1; }

echo "== 1. checks that pass"
printf '%s\n' "# system deck ranks layout fom tolerance note" \
  "testhost tiny 1 local 1 0.5 far below any machine" "testhost tiny 2 ulysses 1 0.5 far below any machine" > pass.tsv
rc=0
MINILST_REFERENCES=$PWD/pass.tsv MINILST_DECKS=tiny MINILST_POINTS=1:local,2:ulysses MINILST_SETS="--set run.steps=3" \
  "$bench/run.sh" "$PWD/pass" > pass.txt 2>&1 || rc=$?
cat pass.txt
[[ $rc == 0 ]] || fail "run.sh exited $rc on runs that pass"
for point in "1 | +local" "2 | +ulysses"; do
  grep -Eq "^\| +testhost \| +tiny \| +$point \| +VALID \| +[0-9.]+ \| +1.0 \| +0.5 \|.*\| +PASS \|" pass.txt \
    || fail "no VALID, PASS row for tiny $point"
done
[[ $(find pass -name job.out | wc -l) == 2 ]] || fail "expected two Slurm jobs' outputs (job.out)"
grep -q "ranks=2 " pass/000000/*_run/work/minilst.log || fail "no 2-rank RESULT line"

echo "== 2. checks that fail: a reference out of reach, an INVALID run"
export MINILST_LAUNCH="mpiexec --oversubscribe"  # the default launcher ran in 1; these runs are one rank each
printf '%s\n' "testhost tiny 1 local 1e12 0.5 impossibly high" "testhost default 1 local 1 0.5 far below" > fail.tsv
rc=0
MINILST_REFERENCES=$PWD/fail.tsv MINILST_DECKS=tiny,default MINILST_POINTS=1:local \
  MINILST_SETS="--set run.steps=3 --set run.warmup_steps=1 --set run.seed=7" \
  "$bench/run.sh" "$PWD/fail" > fail.txt 2>&1 || rc=$?
cat fail.txt
[[ $rc == 1 ]] || fail "run.sh exited $rc, not 1, on runs that must fail"
grep -Eq "^\| +testhost \| +tiny \| +1 \| +local \| +VALID \|.*\| +FAIL \| +FOM .* below the reference 1e\+12 by more than its tolerance 0.5" fail.txt \
  || fail "tiny against 1e12: no FAIL row naming the reference"
grep -Eq "^\| +testhost \| +default \| +1 \| +local \| +INVALID \|.*\| +FAIL \| +verdict INVALID" fail.txt \
  || fail "default with a wrong seed: no INVALID, FAIL row"

echo "== 3. a system without references"
log=$(ls pass/000000/*_run/work/minilst.log | head -1)
rc=0
"$PYTHON" "$bench/check_result.py" --log "$log" --references pass.tsv --system elsewhere --deck tiny --ranks 1 \
  --layout local > none.txt || rc=$?
cat none.txt
[[ $rc == 1 ]] && grep -q "CHECK: FAIL .*no reference for system elsewhere, deck tiny, 1 ranks, layout local" none.txt \
  || fail "a missing reference passed"
echo "PASS"
