#!/usr/bin/env bash
# The device check rehearsed on this host (scripts/gpu/check.sh --dry-run): every part
# runs at tiny sizes with the host build and PyTorch on the CPU and passes; the summary
# holds every key a GPU run writes (scripts/gpu/summary.py's own list) with the parts'
# figures filled in; then with a budget too small for the later parts, those are
# skipped, the first one kept, and the summary still complete. Environment (ctest):
# MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/../app/common.sh"
check=$MINILST_SOURCE/scripts/gpu/check.sh
MINILST=$MINILST TORCH_PYTHON=$PYTHON bash "$check" full --dry-run > full.log 2>&1 || { tail -40 full.log; exit 1; }
tail -3 full.log
"$PYTHON" - full/summary.json "$MINILST_SOURCE/scripts/gpu" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[2])
import summary as S
s = json.load(open(sys.argv[1]))
assert s["schema"] == "minilst-gpu-check" and s["mode"] == "dry-run", s["mode"]
missing = [k for k in S.SUMMARY_KEYS if k not in s]
assert not missing, f"summary keys missing: {missing}"
assert set(s["parts"]) == set(S.PARTS), s["parts"].keys()
bad = {n: p for n, p in s["parts"].items() if p["status"] != "passed"}
assert not bad, f"parts not passed: {bad}"
assert s["verdict"] == "PASSED" and not s["errors"], (s["verdict"], s["errors"])
assert s["device"]["preflight"]["libraries"] == "ok" and s["device"]["preflight"]["python"], s["device"]
ct = s["cuda_tests"]
assert ct["passed"] >= 2 and ct["failed"] == 0, ct
assert all(p["tests_passed"] and p["tests_passed"] > 0 for p in ct["programs"].values()), ct  # GoogleTest's counts read
lc = s["layer_check"]
assert lc["verdict"] == "PASSED" and lc["reference"] and lc["max_rel_diff"] <= lc["rtol"], lc
assert len(s["attention"]["runs"]) == 2 and all(r["fraction_of_gemm"] > 0 for r in s["attention"]["runs"]), s["attention"]
st = s["step"]
assert st["minilst_step_s"] > 0 and st["torch_step_s"] > 0 and st["ratio"] > 0, st
assert 0 < st["minilst_mfu"] and 0 < st["torch_mfu"], st
assert abs(s["memory"]["tracked_over_plan"] - 1) < 1e-9, s["memory"]  # the host tracks exactly what the plan says
tr = s["team_rows"]  # the row-wise kernels in the GPU's layout: the same layer check, a timed step
assert tr["layer_check_verdict"] == "PASSED" and tr["step_s"] > 0 and tr["phases"].get("lm_head", 0) > 0, tr
assert {r["policy"] for r in s["offload"]["runs"]} == {"offload", "checkpoint_offload"}, s["offload"]
assert all(r["verdict"] == "PASSED" and r["copy_busy_s"] > 0 for r in s["offload"]["runs"]), s["offload"]
for k in ("attention_fraction_of_gemm", "step_ratio_to_torch", "memory_tracked_within_plan"):
    assert s["targets"][k]["value"] is not None, k
print("dry run: every part passed, every key present")
PY
# The budget: 20 s leave the first part (device) its 5 s minimum and no later part its
# own, so every later part is skipped (never started), what ran is kept, the summary
# still has every key, and the verdict says the check is incomplete, not failed.
MINILST=$MINILST TORCH_PYTHON=$PYTHON bash "$check" short --dry-run --budget-s 20 > short.log 2>&1 ||
  { tail -40 short.log; exit 1; }
"$PYTHON" - short/summary.json "$MINILST_SOURCE/scripts/gpu" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[2])
import summary as S
s = json.load(open(sys.argv[1]))
assert not [k for k in S.SUMMARY_KEYS if k not in s]
status = {n: p["status"] for n, p in s["parts"].items()}
assert status["device"] == "passed", status
assert all(status[n] == "skipped" for n in S.PARTS[1:]), status
assert s["verdict"] == "INCOMPLETE" and s["device"]["name"], s["verdict"]
print("budget:", status)
PY
# A part stopped by the budget before its own limit is cut short (INCOMPLETE), one that
# ran past its own limit timed out (FAILED); an unreadable metrics file leaves the other
# parts' figures and names itself in errors.
"$PYTHON" - full "$MINILST_SOURCE/scripts/gpu" <<'PY'
import json, os, shutil, subprocess, sys
sys.path.insert(0, sys.argv[2])
def run(d):
    subprocess.run([sys.executable, os.path.join(sys.argv[2], "summary.py"), d, "--mode", "dry-run", "--budget-s", "480"],
                   check=True)
    return json.load(open(os.path.join(d, "summary.json")))
d = "cut"
shutil.copytree(sys.argv[1], d)
status = os.path.join(d, "work", "offload.status")
open(status, "w").write("cut_short 40 200 124\n")
assert run(d)["verdict"] == "INCOMPLETE"
open(status, "w").write("timed_out 200 200 124\n")
assert run(d)["verdict"] == "FAILED"
import h5py
with h5py.File(os.path.join(d, "layer_check.h5"), "w") as f:  # readable, but no losses
    f.attrs["config"] = "model: {}"
s = run(d)
assert "layer_check" in s["errors"] and s["step"]["ratio"] > 0 and s["verdict"] == "FAILED", s["errors"]
assert s["layer_check"]["losses"] is None and "rtol" in s["layer_check"], s["layer_check"]  # null figures, same keys
print("statuses and a bad file: as documented")
PY
# A folder of the user's (files, no check.log) is refused and left as it was.
mkdir -p mine && echo keep > mine/notes.txt && mkdir -p mine/work && echo keep > mine/work/data.txt
if bash "$check" mine --dry-run > mine.log 2>&1; then echo "FAIL: a folder of the user's accepted"; exit 1; fi
grep -q "no earlier check" mine.log && [[ $(cat mine/notes.txt mine/work/data.txt) == $'keep\nkeep' ]] ||
  { echo "FAIL: the user's folder was not refused untouched"; cat mine.log; exit 1; }
# A bad command line is refused before anything runs.
if bash "$check" x --budget-s abc > bad.log 2>&1; then echo "FAIL: --budget-s abc accepted"; exit 1; fi
grep -q "budget-s 'abc'" bad.log
echo "gpu check dry run: passed"
