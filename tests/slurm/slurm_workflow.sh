#!/usr/bin/env bash
# The Slurm workflow against a real slurmctld + slurmd on localhost (a private
# instance: tests/slurm/local_slurm.sh; skipped, exit 77, where it cannot start):
#  1. the batch template with its own resources (2 tasks x 1 CPU: they fit any node), a
#     deck path relative to the submit directory, submitted from outside the checkout with
#     no MINILST_ROOT: a valid 2-rank run in runs/tiny_<...>/, its metrics file the one
#     its RESULT line names;
#  2. the template of an installed tree (PREFIX/share/minilst, the program in PREFIX/bin)
#     with --set only: the installed default deck, in ./runs of the submit directory, the
#     metrics file named by the program with its JSON summary beside it;
#  3. a refused deck, with resources given on the sbatch command line (-n 1 -c 2): its error
#     (stderr) in minilst.log, no RESULT line and no warning about one;
#  4. `sbatch --test-only` accepts the template's defaults here and refuses what cannot start;
#  5. the sweep's checks before anything is written: layouts a rank count cannot form and
#     layouts the program refuses are skipped with the reason, a rank count Slurm cannot run
#     is skipped with sbatch's reason, no point at all writes nothing;
#  6. an array sweep, ring and hybrid on 2 and 4 ranks: ring 2, ring 4 and hybrid 2 x 2
#     (--overcommit: 4 ranks on 2 CPUs), each point's metrics file, the aggregated table;
#  7. a --local sweep, and a --dry-run sweep of the installed tree.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/../app/common.sh"
source "$(dirname "$0")/local_slurm.sh"
source "$MINILST_SOURCE/scripts/slurm/lib.sh"  # metrics_file
# MinJobAge=6: `sbatch --wait` polls every 2 s instead of backing off to 32 s (it lengthens its
# sleep only while the sleep is under a third of MinJobAge); nothing here reads a finished job.
# KillWait=5: mpirun, aborting a job whose rank failed (section 3), lingers twice the template's
# sigkill timeout (KillWait - 3 s) after its ranks are gone; slurm_stop.sh tests the default.
start_local_slurm MinJobAge=6 KillWait=5
export RUNS_DIR=$tmp/runs LAUNCH="mpiexec --oversubscribe"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
template=$MINILST_SOURCE/scripts/slurm/minilst.sbatch
sweep_sh=$MINILST_SOURCE/scripts/slurm/sweep.sh
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p submit/decks && cp "$MINILST_SOURCE/inputs/tiny.yaml" submit/decks/ && cd submit

echo "== 1. the template's defaults, a relative deck, from outside the checkout"
sbatch --wait --time=10 --output=one.out "$template" decks/tiny.yaml --set run.steps=3 > /dev/null || { cat one.out; fail "the job failed"; }
run=$(ls -d "$RUNS_DIR"/tiny_*) && [[ $(wc -l <<< "$run") == 1 ]] || { cat one.out; fail "expected one run directory runs/tiny_*"; }
grep -E "RESULT: VALID .*ranks=2 " "$run/minilst.log" || { cat one.out; fail "no valid 2-rank RESULT"; }
grep -q "deck: $PWD/decks/tiny.yaml" "$run/minilst.log" || fail "the relative deck was not used"
grep -qx "SLURM_NTASKS=2" "$run/environment.txt" && grep -qx "SLURM_CPUS_PER_TASK=1" "$run/environment.txt" \
  || fail "the template's default is not 2 tasks x 1 CPU: $(grep -E 'NTASKS|CPUS_PER_TASK' "$run/environment.txt")"
metrics=$(metrics_file "$run" "$run/minilst.log" "$MINILST") || fail "no metrics file in $run: $(ls "$run")"
grep -q "metrics file: $metrics" one.out || { cat one.out; fail "the job's output does not name $metrics"; }
! grep -q WARNING one.out || { cat one.out; fail "a warning"; }
"$PYTHON" - "$metrics" <<'PY'
import h5py, re, sys
a = h5py.File(sys.argv[1]).attrs
print(sys.argv[1], "job", a["SLURM_JOB_ID"], "cluster", a["SLURM_CLUSTER_NAME"], "Adiak's clustername", a["clustername"])
adiak = re.sub(r"[0-9]", "", a["hostname"].split(".")[0])  # Adiak's: the host name without digits
sys.exit(a["SLURM_JOB_ID"] == "" or a["SLURM_CLUSTER_NAME"] != "minilst-test" or a["clustername"] != adiak
         or a["jobsize"] != "2")
PY

echo "== 2. an installed tree, --set only"
prefix=$tmp/prefix
mkdir -p "$prefix/bin" "$prefix/share/minilst" installed
ln -s "$MINILST" "$prefix/bin/minilst"
cp -r "$MINILST_SOURCE/scripts" "$MINILST_SOURCE/inputs" "$prefix/share/minilst/"
(cd installed && env -u MINILST -u BUILD_DIR -u RUNS_DIR -u MINILST_ROOT sbatch --wait --time=10 --output=two.out \
   "$prefix/share/minilst/scripts/slurm/minilst.sbatch" --set run.steps=3 --set parallel.ring_layout=contiguous > /dev/null) \
  || { cat installed/two.out; fail "the installed template failed"; }
run=$(ls -d "$PWD"/installed/runs/default_*) || { cat installed/two.out; fail "no runs/default_* in the submit directory"; }
grep -q "deck: $prefix/share/minilst/inputs/default.yaml" "$run/minilst.log" && grep -q "RESULT: VALID" "$run/minilst.log" \
  || { cat installed/two.out; fail "--set alone did not run the installed default deck"; }
metrics=$(metrics_file "$run" "$run/minilst.log" "$MINILST") || fail "no metrics file in $run: $(ls "$run")"
[[ $(basename "$metrics") != metrics.h5 && -f ${metrics%.h5}.json ]] || fail "not a file named by the program with its JSON: $(ls "$run")"
echo "$metrics"

echo "== 3. a refused deck keeps its error in the log, and no warning about a RESULT line"
sbatch --wait -n 1 -c 2 --time=10 --output=three.out "$template" decks/tiny.yaml --set model.heads=3 > /dev/null \
  && fail "the job succeeded"
run=$(ls -td "$RUNS_DIR"/tiny_* | head -1)
grep "error: deck: model.hidden (40) is not divisible by model.heads (3)" "$run/minilst.log" \
  || { cat "$run/minilst.log"; fail "stderr is not in minilst.log"; }
! grep -q "^RESULT" "$run/minilst.log" || fail "a RESULT line for a refused deck"
! grep -q WARNING three.out || { cat three.out; fail "a warning about a RESULT line that does not exist"; }
grep -qx "SLURM_NTASKS=1" "$run/environment.txt" && grep -qx "SLURM_CPUS_PER_TASK=2" "$run/environment.txt" \
  || fail "-n 1 -c 2 on the command line did not override the template's resources"

echo "== 4. sbatch --test-only"
sbatch --test-only "$template" 2>&1 | grep "to start" || fail "the template's defaults cannot start on this node"
! sbatch --test-only -n 64 -c 8 "$template" 2> refused.err || fail "sbatch --test-only accepted 512 CPUs"
cat refused.err

echo "== 5. the sweep's checks, before anything is written"
bash "$sweep_sh" decks/tiny.yaml --ranks 1,2,3,4 --strategies ulysses,ring,hybrid --repeats 1 --dry-run \
  > dry.out 2> dry.err || { cat dry.out dry.err; fail "the dry run failed"; }
cat dry.err
sweep=$(tail -1 dry.out)
grep -q "skipped hybrid on 2 rank(s): hybrid needs U x R ranks with U, R >= 2" dry.err &&
  grep -q "skipped hybrid on 3 rank(s)" dry.err &&
  grep -q "skipped ulysses on 3 rank(s).*model.heads (4) is not divisible by the Ulysses degree" dry.err \
  || fail "a skipped layout without its reason"
cut -f2,4 "$sweep/points.tsv" | tr '\t\n' ' ,' | tee /dev/stderr |
  grep -qx "ranks strategy,1 local,2 ulysses,2 ring,3 ring,4 ulysses,4 ring,4 hybrid," || fail "points.tsv: $(cat "$sweep/points.tsv")"
grep -q "parallel.ulysses=2 parallel.ring=2" <(grep hybrid "$sweep/points.tsv") || fail "hybrid on 4 ranks is not 2 x 2"
[[ $(ls "$sweep") == points.tsv ]] || fail "a dry run left $(ls "$sweep")"
before=$(ls "$RUNS_DIR")
bash "$sweep_sh" decks/tiny.yaml --ranks 2,3 --strategies hybrid --dry-run 2> none.err && fail "a sweep of no point succeeded"
cat none.err
grep -q "skipped hybrid on 2 rank(s)" none.err && grep -q "nothing written" none.err || fail "no reason given"
bash "$sweep_sh" decks/tiny.yaml --ranks 8 --strategies ring --repeats 1 -- --time=10 2> eight.err && fail "8 ranks were submitted"
cat eight.err
grep -q "skipped the 8-rank points: Slurm cannot run 8 task(s)" eight.err || fail "no reason given for 8 ranks"
[[ -z $(squeue -h) ]] || fail "a job was submitted: $(squeue)"
bash "$sweep_sh" decks/tiny.yaml --strategies bogus 2> /dev/null && fail "a bogus strategy was accepted"
[[ $(ls "$RUNS_DIR") == "$before" ]] || fail "a refused sweep wrote $(ls "$RUNS_DIR")"

echo "== 6. an array sweep: ring and hybrid on 2 and 4 ranks"
LAUNCH="mpiexec --oversubscribe -n" bash "$sweep_sh" decks/tiny.yaml --ranks 2,4 --strategies ring,hybrid --repeats 1 \
  -- --wait --time=10 --overcommit | tee sweep.out
sweep=$(tail -1 sweep.out)
for i in 0 1 2; do
  metrics=$(metrics_file "$sweep/point_$i" "$sweep/point_$i/minilst.log" "$MINILST") \
    || { cat "$sweep/point_$i.out" "$sweep/point_$i/minilst.log"; fail "point $i has no metrics file"; }
  grep -q "^RESULT: VALID" "$sweep/point_$i/minilst.log" || { cat "$sweep/point_$i.out"; fail "point $i is not VALID"; }
  echo "point $i: $metrics"
done
"$PYTHON" "$MINILST_SOURCE/analysis/sweep.py" "$sweep" || { cat "$sweep"/point_*.out; exit 1; }
"$PYTHON" - "$sweep" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(f"{sys.argv[1]}/sweep_runs.csv")))
print([(r["index"], r["ranks"], r["strategy"], r["job_id"], r["array_task"], r["verdict"], r["cluster"]) for r in rows])
ok = (len(rows) == 3 and all(r["verdict"] == "VALID" and r["job_id"].isdigit() and r["cluster"] == "minilst-test"
      for r in rows) and {r["array_task"] for r in rows} == {"0", "1", "2"}
      and {(r["ranks"], r["strategy"]) for r in rows} == {("2", "ring"), ("4", "ring"), ("4", "hybrid")})
sys.exit(0 if ok else 1)
PY

echo "== 7. a --local sweep; a dry run of the installed tree"
LAUNCH="mpiexec --oversubscribe -n" bash "$sweep_sh" decks/tiny.yaml --ranks 1 --repeats 1 --local | tee local.out
sweep=$(tail -1 local.out)
grep -q "^RESULT: VALID" "$sweep/point_0/minilst.log" && metrics_file "$sweep/point_0" "$sweep/point_0/minilst.log" "$MINILST" \
  || fail "the local point did not run"
(cd installed && env -u MINILST -u BUILD_DIR -u RUNS_DIR bash "$prefix/share/minilst/scripts/slurm/sweep.sh" \
   --ranks 1,2 --repeats 1 --dry-run > dry.out) || fail "the installed sweep failed"
sweep=$(tail -1 installed/dry.out)
[[ $sweep == "$PWD"/installed/runs/sweep_scaling_cpu_* ]] && grep -q "$prefix/share/minilst/inputs/scaling_cpu.yaml" "$sweep/points.tsv" \
  || fail "the installed sweep: $sweep"
echo PASSED
