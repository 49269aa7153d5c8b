#!/usr/bin/env bash
# The Slurm workflow against a real slurmctld + slurmd on localhost (a private
# instance: tests/slurm/local_slurm.sh; skipped, exit 77, where it cannot start):
#  1. the batch template with a deck path relative to the submit directory, submitted
#     from outside the checkout with no MINILST_ROOT: a valid 2-rank run in its own directory;
#  2. the template with --set only (the default deck);
#  3. a failing run: its error (stderr) is in minilst.log;
#  4. a 2-point array sweep (scripts/slurm/sweep.sh) and its aggregated table.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/../app/common.sh"
source "$(dirname "$0")/local_slurm.sh"
start_local_slurm
export BUILD_DIR RUNS_DIR=$tmp/runs LAUNCH="mpiexec --oversubscribe"
BUILD_DIR=$(realpath --relative-to="$MINILST_SOURCE" "$(dirname "$MINILST")")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
template=$MINILST_SOURCE/scripts/slurm/minilst.sbatch
opts=(--wait --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 --time=10)
mkdir -p submit/decks && cp "$MINILST_SOURCE/inputs/tiny.yaml" submit/decks/ && cd submit

echo "== 1. relative deck, from outside the checkout"
sbatch "${opts[@]}" --output=one.out "$template" decks/tiny.yaml --set run.steps=3 > /dev/null || { cat one.out; exit 1; }
run=$(ls -d "$RUNS_DIR"/job_*) && [[ $(wc -l <<< "$run") == 1 ]] || { echo "FAIL: expected one run directory"; cat one.out; exit 1; }
grep -E "RESULT: VALID .*ranks=2 " "$run/minilst.log" || { echo "FAIL: no valid 2-rank RESULT"; cat one.out; exit 1; }
grep -q "deck: $PWD/decks/tiny.yaml" "$run/minilst.log" || { echo "FAIL: the relative deck was not used"; exit 1; }
[[ -f $run/metrics.h5 && -s $run/environment.txt ]] || { echo "FAIL: no metrics.h5 or environment.txt"; exit 1; }
"$PYTHON" -c "import h5py, sys; f = h5py.File('$run/metrics.h5'); print('job', f.attrs['SLURM_JOB_ID'], 'cluster', f.attrs['clustername']); sys.exit(f.attrs['SLURM_JOB_ID'] == '' or f.attrs['clustername'] != 'minilst-test')"

echo "== 2. --set only"
sbatch "${opts[@]}" --output=two.out "$template" --set run.steps=3 --set parallel.ring_layout=contiguous > /dev/null || { cat two.out; exit 1; }
run=$(ls -td "$RUNS_DIR"/job_* | head -1)
grep -q "deck: $MINILST_SOURCE/inputs/default.yaml" "$run/minilst.log" && grep -q "RESULT: VALID" "$run/minilst.log" \
  || { echo "FAIL: --set alone did not run the default deck"; cat two.out; exit 1; }

echo "== 3. a failing run keeps its error in the log"
sbatch "${opts[@]}" --output=three.out "$template" decks/tiny.yaml --set model.heads=3 > /dev/null && { echo "FAIL: the job succeeded"; exit 1; }
run=$(ls -td "$RUNS_DIR"/job_* | head -1)
grep "error: deck: model.hidden (40) is not divisible by model.heads (3)" "$run/minilst.log" \
  || { echo "FAIL: stderr is not in minilst.log"; cat "$run/minilst.log"; exit 1; }

echo "== 4. a 2-point array sweep"
LAUNCH="mpiexec --oversubscribe -n" bash "$MINILST_SOURCE/scripts/slurm/sweep.sh" decks/tiny.yaml --ranks 2 \
  --strategies ring --repeats 2 -- --wait --cpus-per-task=1 --time=10 | tee sweep.out
sweep=$(tail -1 sweep.out)
"$PYTHON" "$MINILST_SOURCE/analysis/sweep.py" "$sweep" || { cat "$sweep"/point_*.out; exit 1; }
"$PYTHON" - "$sweep" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(f"{sys.argv[1]}/sweep_runs.csv")))
print([(r["index"], r["job_id"], r["array_task"], r["valid"], r["cluster"]) for r in rows])
ok = (len(rows) == 2 and all(r["valid"] == "PASSED" and r["job_id"].isdigit() and r["cluster"] == "minilst-test"
      for r in rows) and {r["array_task"] for r in rows} == {"0", "1"})
sys.exit(0 if ok else 1)
PY
echo PASSED
