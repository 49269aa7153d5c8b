#!/usr/bin/env bash
# Concurrent runs never share an output: two batch-template runs, two sweeps and
# two runs with output.metrics = auto, each pair started in the same second, write
# different directories and files. The template's directories are named by the deck
# (runs/tiny_<UTC>_local_<pid>/), a sweep's by the deck too (runs/sweep_tiny_...),
# and each template run has one metrics file, the one its RESULT line names.
# Environment (set by ctest): MINILST, MINILST_SOURCE.
source "$(dirname "$0")/common.sh"
export RUNS_DIR=$tmp/runs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BUILD_DIR=$(realpath --relative-to="$MINILST_SOURCE" "$(dirname "$MINILST")")
export BUILD_DIR LAUNCH="$MINILST_SOURCE/tests/app/no_launcher.sh"
deck=$MINILST_SOURCE/inputs/tiny.yaml
for i in 1 2; do
  MINILST_ROOT=$MINILST_SOURCE bash "$MINILST_SOURCE/scripts/slurm/minilst.sbatch" "$deck" > "template$i.log" 2>&1 &
  bash "$MINILST_SOURCE/scripts/slurm/sweep.sh" "$deck" --ranks 1 --repeats 1 --dry-run > "sweep$i.log" 2>&1 &
  "$MINILST" run "$deck" --set output.metrics=auto > "auto$i.log" 2>&1 &
done
wait
jobs=$(ls -d "$RUNS_DIR"/tiny_* | wc -l) sweeps=$(ls -d "$RUNS_DIR"/sweep_tiny_* | wc -l) autos=$(ls ./*.h5 | wc -l)
metrics=0
for run in "$RUNS_DIR"/tiny_*; do
  file=$(sed -n 's/^RESULT: .* metrics=\(.*\)$/\1/p' "$run/minilst.log")
  [[ $file == /* ]] || file=$run/$file
  if [[ -f $file && $(ls "$run"/*.h5 | wc -l) == 1 ]]; then metrics=$((metrics + 1)); fi
done
ls -d "$RUNS_DIR"/* ./*.h5
echo "template runs: $jobs directories, $metrics metrics files; sweeps: $sweeps; auto metrics files: $autos"
((jobs == 2 && metrics == 2 && sweeps == 2 && autos == 2)) || { cat template*.log sweep*.log; exit 1; }
echo PASSED
