#!/usr/bin/env bash
# The run rules enforced, and what a run writes for machines besides HDF5:
#   - a 2-step run without warm-up is VALID but not reportable, naming the rules it breaks;
#   - a compliant run of a shipped deck with its reference is reportable; `minilst result` agrees;
#   - a deck whose problem differs from its reference's is not reportable, even within tolerance;
#   - the JSON summary beside every metrics file says what the file says, and the
#     MLPerf-style event lines parse; a user's file where the summary would go is refused;
#   - energy: unavailable with the reason on a node without counters; read from RAPL
#     counters (a powercap tree whose counters a background loop advances, wrapping) where present.
source "$(dirname "$0")/common.sh"
deck=$MINILST_SOURCE/inputs/default.yaml

# 1. Too short to report.
"$MINILST" run "$MINILST_SOURCE/inputs/tiny.yaml" --set run.steps=2 --set run.warmup_steps=0 \
  --set output.metrics=short.h5 > short.log 2>&1
grep -q "^RESULT: VALID FOM=.* reportable=no (fewer than 5 measured steps; no warm-up step; no reference answer) metrics=short.h5$" short.log \
  || { cat short.log; exit 1; }

# 2. A compliant run of a shipped deck as shipped (2 ranks; its reference answer, 6 measured steps
#    after 2 warm-up steps).
"${MPIEXEC:-mpiexec}" --oversubscribe -n 2 "$MINILST" run "$deck" --set output.metrics=good.h5 > good.log 2>&1 || { cat good.log; exit 1; }
grep -q "^RESULT: VALID FOM=.* reportable=yes metrics=good.h5$" good.log || { cat good.log; exit 1; }
"$MINILST" result good.h5 | grep -q "reportable=yes metrics=good.h5$"

# 3. Another problem within a loose tolerance: VALID, not reportable.
"$MINILST" run "$deck" --set parallel.ring=1 --set run.steps=3 --set run.warmup_steps=1 --set run.seed=99 --set reference.rtol=1 \
  --set output.metrics=other.h5 > other.log 2>&1 || { cat other.log; exit 1; }
grep -q "^RESULT: VALID .* reportable=no (fewer than 5 measured steps; the deck's problem differs from its reference's)" other.log \
  || { cat other.log; exit 1; }

# 4. The user's file where the summary would go: refused, untouched, nothing written.
echo '{"mine": true}' > user.json
if "$MINILST" run "$deck" --set parallel.ring=1 --set output.metrics=user.h5 > user.log 2>&1; then cat user.log; exit 1; fi
grep -q "error: output.metrics: its JSON summary 'user.json' exists and is not a miniLST summary" user.log || { cat user.log; exit 1; }
[[ $(cat user.json) == '{"mine": true}' && ! -e user.h5 ]]

# 5. Energy from RAPL counters: package 0 (its sub-zone not counted twice) advancing 0.5 J every
#    5 ms and wrapping at 20 J.
rapl=$PWD/powercap
mkdir -p "$rapl/intel-rapl:0/intel-rapl:0:0" "$rapl/intel-rapl:0:0"
echo 20000000 > "$rapl/intel-rapl:0/max_energy_range_uj"
echo 0 > "$rapl/intel-rapl:0/energy_uj"
for zone in "intel-rapl:0:0"; do echo 20000000 > "$rapl/$zone/max_energy_range_uj"; echo 5 > "$rapl/$zone/energy_uj"; done
( uj=0; while :; do uj=$(((uj + 500000) % 20000000)); echo $uj > "$rapl/e.tmp"; mv "$rapl/e.tmp" "$rapl/intel-rapl:0/energy_uj"; sleep 0.005; done ) &
ticker=$!
MINILST_POWERCAP_ROOT=$rapl "$MINILST" run "$deck" --set parallel.ring=1 --set run.steps=4 --set run.warmup_steps=1 --set output.metrics=rapl.h5 \
  > rapl.log 2>&1 || { kill $ticker; cat rapl.log; exit 1; }
kill $ticker
grep -q "^energy: rapl (CPU packages through powercap" rapl.log || { cat rapl.log; exit 1; }

"$PYTHON" - short.h5 good.h5 other.h5 rapl.h5 short.log good.log <<'PY'
import json, sys, h5py, numpy as np
names = sys.argv[1:5]
for name in names:  # the summary beside each file says what the file says
    f, j = h5py.File(name, "r"), json.load(open(name[:-3] + ".json"))
    a = f.attrs
    assert j["schema"] == "minilst-summary" and j["metrics_file"] == name, j
    assert j["verdict"] == ("VALID" if a["valid"] == "PASSED" else "INVALID"), (name, j["verdict"])
    assert j["reportable"] == (a["reportable"] == "yes"), name
    assert "; ".join(j["reportable_reasons"]) == a["reportable_reasons"], name
    assert np.isclose(j["fom"]["value"], a["fom"]) and j["steps_done"] == len(f["loss"]), name
    assert np.allclose(j["loss"], f["loss"][:]), name
    assert j["measured_steps"] == len(f["loss"]) - a["warmup_steps"] == a["measured_steps"], name
    for key in ("cpu_model", "cpu_isa", "cpu_cores", "memory_bytes", "hostname"):
        assert j["machine"][key] not in (None, ""), (name, key)
    assert j["machine"]["cpu_cores"] == int(a["cpu_cores"]) and j["machine"]["memory_bytes"] == int(a["memory_bytes"])
    assert j["build"]["git_commit"] == a["git_commit"] and j["run_name"] == a["run_name"], name
    assert abs(j["timings_s"]["step"] - f["timings/step"].attrs["Avg time/rank"]) < 1e-9, name
    assert j["memory_bytes"]["device_total"] == int(f["memory/device_total"][:].max()), name
assert json.load(open("good.json"))["reportable"] is True
assert json.load(open("short.json"))["run_name"] == "tiny_single_1r"

# no counters on this node: unavailable with the reason, no per-step energy (unless the node has RAPL)
g = h5py.File("good.h5", "r")
if g.attrs["energy_source"] == "unavailable":
    assert g.attrs["energy_note"] and "energy" not in g and "energy_joules" not in g.attrs
    assert json.load(open("good.json"))["energy"]["tokens_per_joule"] is None
# the RAPL tree: per-step joules of rank 0, their sum over the measured steps, tokens per joule
r = h5py.File("rapl.h5", "r")
assert r.attrs["energy_source"] == "rapl", r.attrs["energy_source"]
e = r["energy/joules"][:]
assert e.shape == (4, 1) and (e >= 0).all() and (e < 1e3).all(), e  # a wrap never shows as a huge or negative step
w = int(r.attrs["warmup_steps"])
assert np.isclose(r.attrs["energy_joules"], e[w:].sum()) and np.isclose(r.attrs["energy_joules_run"], e.sum())
assert e.sum() > 0.5, e   # about 100 J/s for as long as the steps ran
tpj = r.attrs["tokens_per_step"] * (4 - w) / e[w:].sum()
assert np.isclose(r.attrs["tokens_per_joule"], tpj) and np.isclose(json.load(open("rapl.json"))["energy"]["tokens_per_joule"], tpj)

# MLPerf-style event lines: JSON after ":::MLLOG ", the run's keys in order, its losses
for log, status in (("short.log", "success"), ("good.log", "success")):
    events = [json.loads(l[len(":::MLLOG "):]) for l in open(log) if l.startswith(":::MLLOG ")]
    keys = [e["key"] for e in events]
    assert keys[0] == "init_start" and keys[-1] == "run_stop" and "run_start" in keys, keys
    assert all({"namespace", "time_ms", "event_type", "key", "value", "metadata"} <= e.keys() for e in events)
    assert events[-1]["metadata"]["status"] == status
    losses = [e["value"] for e in events if e["key"] == "train_loss"]
    assert np.allclose(losses, h5py.File(log.replace(".log", ".h5"), "r")["loss"][:]), log
print("run rules, JSON summaries, MLPerf lines and energy: as expected")
PY
