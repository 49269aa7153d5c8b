#!/usr/bin/env bash
# Batch-job duties end to end, each against what it once did wrong:
#  1. one rank, run.watchdog_s far below the set-up's time: no watchdog on one rank, VALID;
#  2. two ranks, run.watchdog_s 1 s, rank 0 pausing 4 s in the set-up and 5 s before the final
#     write (MINILST_TEST_STALL, the test hook): the set-up and the final write have their own
#     patience, VALID with its RESULT line;
#  3. --kokkos-tools-libs naming a file that is no library: refused, exit 2, with the reason;
#  4. a SLURM_JOB_ID holding '/' and a space: the metrics file (output.metrics: auto) named with
#     '_' in the working directory, nothing written elsewhere; the batch template refuses it;
#  5. placement: two ranks allowed on the same cores (--bind-to none) are not reportable, the
#     shared core named, every rank's host, CPUs and cores recorded; bound to a core each (where
#     the machine has two), no such rule;
#  6. one verdict spelling: the RESULT line, the JSON summary, the MLPerf line and `minilst result`
#     agree on VALID and on yes/no.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON, MPIEXEC.
source "$(dirname "$0")/common.sh"
tiny=$MINILST_SOURCE/inputs/tiny.yaml
mpi=("${MPIEXEC:-mpiexec}" --oversubscribe)
fail() { echo "FAIL: $*"; exit 1; }

echo "== 1. one rank: the watchdog never acts"
t0=$SECONDS
rc=0; "$MINILST" run "$tiny" --set run.steps=3 --set run.watchdog_s=0.001 --set output.metrics=one.h5 > one.log 2>&1 || rc=$?
((rc == 0)) && grep -q "^RESULT: VALID" one.log || { cat one.log; fail "one rank with run.watchdog_s 0.001: exit $rc"; }
! grep -q "the watchdog (run.watchdog_s)" one.log || fail "a watchdog message on one rank"
echo "VALID in $((SECONDS - t0)) s"

echo "== 2. two ranks: a slow set-up and a slow final write are no stuck peer"
t0=$SECONDS
rc=0; MINILST_TEST_STALL=setup:4,final_write:5 "${mpi[@]}" -n 2 "$MINILST" run "$tiny" --set run.steps=3 \
  --set parallel.ring=2 --set run.watchdog_s=1 --set output.metrics=stall.h5 > stall.log 2>&1 || rc=$?
grep -E "MINILST_TEST_STALL|RESULT|the watchdog" stall.log
((rc == 0)) && grep -q "^RESULT: VALID .* ranks=2 " stall.log || { cat stall.log; fail "exit $rc, expected a VALID run"; }
((SECONDS - t0 >= 9)) || fail "the test hook did not pause rank 0"
! grep -q "error" stall.log || fail "an error"

echo "== 3. a tools library that cannot load"
rc=0; "$MINILST" run "$tiny" --kokkos-tools-libs=/etc/passwd > tools.log 2>&1 || rc=$?
cat tools.log
((rc == 2)) && grep -q "'/etc/passwd' is not a loadable shared library" tools.log || fail "exit $rc, expected 2 with the reason"
[[ ! -e tiny_metrics.h5 ]] || fail "a refused run wrote its metrics file"

echo "== 4. SLURM_JOB_ID in a file name"
mkdir -p here
(cd here && SLURM_JOB_ID="../../evil job" SLURM_ARRAY_TASK_ID="7/x" "$MINILST" run "$tiny" --set run.steps=2 \
   --set output.metrics=auto > run.log 2>&1) || { cat here/run.log; fail "the run failed"; }
grep -E "warning: SLURM_" here/run.log
name=$(sed -n 's/^RESULT: .* metrics=\(.*\)$/\1/p' here/run.log)
echo "metrics file: $name"
[[ $name == tiny_single_1r_*_.._.._evil_job_7_x_*.h5 && -f here/$name ]] || fail "not a sanitised name in the working directory"
[[ -z $(find "$tmp" -name '*evil*' -not -path "$tmp/here/*") ]] || fail "a file outside the working directory"
rc=0; SLURM_JOB_ID="../../evil job" MINILST_ROOT=$MINILST_SOURCE RUNS_DIR=$tmp/runs_evil \
  bash "$MINILST_SOURCE/scripts/slurm/minilst.sbatch" "$tiny" > template.log 2>&1 || rc=$?
cat template.log
((rc == 2)) && grep -q "SLURM_JOB_ID='../../evil job' holds characters other than" template.log \
  || fail "the batch template took a SLURM_JOB_ID with '/': exit $rc"
[[ ! -e $tmp/runs_evil ]] || fail "the batch template made a run directory"

echo "== 5. ranks sharing cores"
"${mpi[@]}" --bind-to none -n 2 "$MINILST" run "$tiny" --set run.steps=2 --set parallel.ring=2 \
  --set output.metrics=shared.h5 > shared.log 2>&1 || { cat shared.log; fail "the run failed"; }
grep "^RESULT" shared.log
grep -Eq "^RESULT: VALID .*reportable=no \(.*ranks share a CPU core \(core [0-9]+ on [^:]+: ranks 0 and 1" shared.log \
  || fail "ranks sharing cores are reportable, or the core is not named"
bound=""
if (($(getconf _NPROCESSORS_ONLN) >= 2)); then
  "${MPIEXEC:-mpiexec}" --bind-to core -n 2 "$MINILST" run "$tiny" --set run.steps=2 --set parallel.ring=2 \
    --set output.metrics=bound.h5 > bound.log 2>&1 || { cat bound.log; fail "the run failed"; }
  grep "^RESULT" bound.log
  ! grep -q "share a CPU core" bound.log || fail "ranks bound to a core each named as sharing one"
  bound=bound.h5
fi
"$PYTHON" - shared.h5 $bound <<'PY'
import json, sys, h5py
for name in sys.argv[1:]:
    a = h5py.File(name, "r").attrs
    places = json.loads(a["placement"])
    print(name, a["cores_shared"], a["cores_shared_note"], places)
    assert [p["rank"] for p in places] == [0, 1] and all(p["host"] and p["cpus"] and p["cores"] for p in places)
    shared = name == "shared.h5"
    assert a["cores_shared"] == ("yes" if shared else "no"), a["cores_shared"]
    assert bool(places[0]["shares_core_with"]) == shared and ("ranks share a CPU core" in a["reportable_reasons"]) == shared
    assert a["jobsize"] == "2" and a["numhosts"] == "1"
PY

echo "== 6. one verdict, one spelling"
"$PYTHON" - one.log one.h5 "$MINILST" <<'PY'
import json, subprocess, sys, h5py
log, h5, exe = sys.argv[1:]
result = [l for l in open(log) if l.startswith("RESULT: ")][-1].split()
verdict, reportable = result[1], next(w for w in result if w.startswith("reportable="))[len("reportable="):]
events = [json.loads(l[l.index("{"):]) for l in open(log) if l.startswith(":::MLLOG ")]
mllog = next(e["value"] for e in events if e["key"] == "minilst_result")
again = subprocess.run([exe, "result", h5], capture_output=True, text=True).stdout.split()
summary = json.load(open(h5[:-3] + ".json"))
a = h5py.File(h5, "r").attrs
print("RESULT:", verdict, reportable, "| MLLOG:", mllog["verdict"], mllog["reportable"], "| JSON:", summary["verdict"],
      summary["reportable"], "| HDF5:", a["reportable"])
assert verdict == mllog["verdict"] == summary["verdict"] == again[1] == "VALID"
assert reportable == mllog["reportable"] == summary["reportable"] == a["reportable"] == "no" and "reportable=no" in again
PY
echo PASSED
