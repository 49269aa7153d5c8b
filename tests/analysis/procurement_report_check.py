#!/usr/bin/python3
"""analysis/procurement_report.py on synthesized plans and metrics files (h5py):
- system A: a plan with a prediction (minilst plan --machine) and three runs of the same point, two VALID and one
  INVALID (the INVALID one counted as failed, never in the median); one run named only by a log's RESULT line;
- system B: a plan without a prediction (n/a, and the note saying why) beside one VALID run;
- system C: a JUBE run's directory (the metrics file below it, once, though the check step links to it);
- the CSV's numbers against the files: demonstrated = the median FOM of the VALID runs, projected per rank =
  predicted_tokens_per_s / ranks, ratio = demonstrated / projected;
- one name per system: a run inside a Slurm job (cluster clusterD, host nodeD) and one outside it on the same
  host are one system, clusterD;
- a file that is no plan: exit 2 naming it.
"""
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from synth_metrics import write_run  # noqa: E402

REPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "analysis", "procurement_report.py")


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def plan(path, predicted=None, name="sysA"):
    p = dict(seq_len=64, ranks=2, data_parallel=1, ulysses=2, ring=1, precision="float32", flops_per_step=1e9)
    if predicted:
        p.update(machine={"name": name, "kind": "probed"}, predicted_step_s=predicted[0],
                 predicted_tokens_per_s=predicted[1], predicted_mfu=0.4)
    with open(path, "w") as f:
        json.dump(p, f)
    return path


def main(tmp):
    os.makedirs(f"{tmp}/a")
    two = ([0], [1])
    foms = [write_run(f"{tmp}/a/r{i}.h5", [0.3, t, t, t], start=1.7e9 + 100 * i, cores_of_rank=two, host="sysA")
            for i, t in enumerate([0.10, 0.12])]
    write_run(f"{tmp}/a/bad.h5", [0.3, 0.01, 0.01, 0.01], cores_of_rank=two, host="sysA", valid=False)
    os.makedirs(f"{tmp}/logs")  # a run named by a RESULT line (its metrics file relative to the log)
    foms.append(write_run(f"{tmp}/logs/r2.h5", [0.3, 0.2, 0.2, 0.2], start=1.7e9 + 900, cores_of_rank=two,
                          host="sysA"))
    with open(f"{tmp}/logs/job.out", "w") as f:
        f.write(f"start\nRESULT: VALID FOM={foms[-1]:.1f} tokens/s/rank steps=4 final_loss=7.000000 ranks=2 "
                f"tier=baseline reportable=yes metrics=r2.h5\n")
    os.makedirs(f"{tmp}/b")
    fom_b = write_run(f"{tmp}/b/r.h5", [0.3, 0.05, 0.05], cores_of_rank=two, host="sysB")
    jube = f"{tmp}/jube/000000"  # a JUBE run: the run step's work directory, linked from the check step's
    os.makedirs(f"{jube}/000001_run/work")
    os.makedirs(f"{jube}/000002_check/work")
    fom_c = write_run(f"{jube}/000001_run/work/metrics.h5", [0.3, 0.1, 0.1], cores_of_rank=two, host="sysC")
    os.symlink("../../000001_run/work", f"{jube}/000002_check/work/run")
    os.makedirs(f"{tmp}/d")
    write_run(f"{tmp}/d/in_job.h5", [0.3, 0.1, 0.1], cores_of_rank=two, host="nodeD", extra={"SLURM_CLUSTER_NAME": "clusterD"})
    write_run(f"{tmp}/d/outside.h5", [0.3, 0.1, 0.1], cores_of_rank=two, host="nodeD")
    plan_a = plan(f"{tmp}/tiny.json", predicted=(0.08, 800.0))
    plan_b = plan(f"{tmp}/planb.json")

    cmd = [sys.executable, REPORT, "--plan", plan_a, "--plan", f"sysB:tiny={plan_b}", "--runs", f"{tmp}/a",
           "--runs", f"{tmp}/logs/job.out", "--runs", f"{tmp}/b", "--runs", jube, "--runs", f"{tmp}/d", "--csv", f"{tmp}/out.csv"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    print(out.stdout, out.stderr)
    if out.returncode != 0:
        fail(f"exit {out.returncode}")
    rows = {r["system"]: r for r in csv.DictReader(open(f"{tmp}/out.csv"))}
    if set(rows) != {"sysA", "sysB", "sysC", "clusterD"}:
        fail(f"expected one row per system, got {sorted(rows)}")
    a, b = rows["sysA"], rows["sysB"]
    demo = statistics.median(foms)
    checks = [
        ("A: the point", (a["deck"], a["ranks"], a["layout"], a["seq_len"]) == ("tiny", "2", "U2 x R1", "64")),
        ("A: demonstrated = median of the VALID FOMs", math.isclose(float(a["demonstrated_tokens_per_s_per_rank"]),
                                                                  demo, rel_tol=1e-9)),
        ("A: 3 VALID runs (one from a log), 1 failed", (a["valid_runs"], a["failed_runs"]) == ("3", "1")),
        ("A: projected per rank = predicted / ranks", math.isclose(float(a["projected_tokens_per_s_per_rank"]), 400)),
        ("A: ratio", math.isclose(float(a["demonstrated_over_projected"]), demo / 400, rel_tol=1e-9)),
        ("A: tier and reportable", (a["tier"], a["reportable"]) == ("baseline", "yes")),
        ("B: no prediction", math.isnan(float(b["projected_tokens_per_s_per_rank"]))
         and math.isnan(float(b["demonstrated_over_projected"]))),
        ("B: demonstrated", math.isclose(float(b["demonstrated_tokens_per_s_per_rank"]), fom_b, rel_tol=1e-9)),
        ("C: a JUBE run's file, found below its directory once", (rows["sysC"]["valid_runs"], rows["sysC"]["failed_runs"])
         == ("1", "0") and math.isclose(float(rows["sysC"]["demonstrated_tokens_per_s_per_rank"]), fom_c, rel_tol=1e-9)),
        ("D: a host inside and outside Slurm is one system", rows["clusterD"]["valid_runs"] == "2"),
        ("markdown table", "| system | deck | ranks |" in out.stdout and "| sysB | tiny |" in out.stdout),
        ("note on the plan without a prediction", "1 plan(s) carry no prediction" in out.stdout),
    ]
    bad = subprocess.run([sys.executable, REPORT, "--plan", f"{tmp}/a/r0.h5"], capture_output=True, text=True)
    checks.append(("not a plan: exit 2 naming it", bad.returncode == 2 and "r0.h5" in bad.stderr))
    for name, ok in checks:
        print(f"{name}: {'ok' if ok else 'FAIL'}")
    if not all(ok for _, ok in checks):
        fail(", ".join(n for n, ok in checks if not ok))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as scratch:
        main(scratch)
