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
# An unoptimised build adds its own rule to every run's reasons.
build_type=$("$PYTHON" -c 'import h5py, sys; print(h5py.File(sys.argv[1], "r").attrs["cmake_build_type"])' short.h5)
case $build_type in Release | RelWithDebInfo) build_rule="" ;; *) build_rule="; build type ${build_type:-unset}, not Release" ;; esac
grep -qF "reportable=no (fewer than 5 measured steps; no warm-up step; no reference answer$build_rule) metrics=short.h5" short.log \
  || { cat short.log; exit 1; }
grep -q "^RESULT: VALID FOM=.* reportable=no " short.log || { cat short.log; exit 1; }

# 2. A compliant run of a shipped deck as shipped (2 ranks; its reference answer, 6 measured steps
#    after 2 warm-up steps).
"${MPIEXEC:-mpiexec}" --oversubscribe -n 2 "$MINILST" run "$deck" --set output.metrics=good.h5 > good.log 2>&1 || { cat good.log; exit 1; }
if [[ -z $build_rule ]]; then
  grep -q "^RESULT: VALID FOM=.* reportable=yes metrics=good.h5$" good.log || { cat good.log; exit 1; }
  "$MINILST" result good.h5 | grep -q "reportable=yes metrics=good.h5$"
else
  grep -qF "reportable=no (${build_rule#; }) metrics=good.h5" good.log || { cat good.log; exit 1; }
fi

# 3. Another problem within a loose tolerance: VALID, not reportable.
"$MINILST" run "$deck" --set parallel.ring=1 --set run.steps=3 --set run.warmup_steps=1 --set run.seed=99 --set reference.rtol=1 \
  --set output.metrics=other.h5 > other.log 2>&1 || { cat other.log; exit 1; }
grep -qF "reportable=no (fewer than 5 measured steps; reference tolerance 1 above 0.0001; the deck's problem differs from its reference's" other.log \
  || { cat other.log; exit 1; }

# 4. The user's file where the summary would go: refused, untouched, nothing written.
echo '{"mine": true}' > user.json
if "$MINILST" run "$deck" --set parallel.ring=1 --set output.metrics=user.h5 > user.log 2>&1; then cat user.log; exit 1; fi
grep -q "error: output.metrics: its JSON summary 'user.json' exists and is not a miniLST summary" user.log || { cat user.log; exit 1; }
[[ $(cat user.json) == '{"mine": true}' && ! -e user.h5 ]]

# 5. Energy from RAPL counters: package 0 advancing 0.5 J a tick and wrapping at 40 J; its
#    sub-zone (core) and the platform zone (psys, which contains the packages) advance 10 J a
#    tick and must not be counted. The ticker counts its ticks: the run's joules are at most
#    0.5 J x ticks (counting either other zone would give 20 times that).
rapl=$PWD/powercap
zone() {  # zone DIR NAME [RANGE]: a powercap zone at 0 uJ wrapping at RANGE uJ (default 40 J)
  mkdir -p "$rapl/$1" && echo "$2" > "$rapl/$1/name" && echo 0 > "$rapl/$1/energy_uj"
  echo "${3:-40000000}" > "$rapl/$1/max_energy_range_uj"
}
zone intel-rapl:0 package-0 && zone intel-rapl:0:0 core 2000000000 && zone intel-rapl:0/intel-rapl:0:0 core 2000000000
zone intel-rapl:1 psys 2000000000
tick() { echo "$2" > "$rapl/t.tmp" && mv "$rapl/t.tmp" "$rapl/$1/energy_uj"; }
( n=0; while :; do n=$((n + 1))
    tick intel-rapl:0 $(((n * 500000) % 40000000))
    for z in intel-rapl:0:0 intel-rapl:0/intel-rapl:0:0 intel-rapl:1; do tick $z $((n * 10000000)); done
    echo $n > "$rapl/ticks.tmp" && mv "$rapl/ticks.tmp" "$rapl/ticks"; sleep 0.005; done ) &
ticker=$!
MINILST_POWERCAP_ROOT=$rapl "$MINILST" run "$deck" --set parallel.ring=1 --set run.steps=4 --set run.warmup_steps=1 --set output.metrics=rapl.h5 \
  > rapl.log 2>&1 || { kill $ticker; cat rapl.log; exit 1; }
kill $ticker
wait $ticker 2> /dev/null || true
grep -q "^energy: rapl (CPU packages through powercap" rapl.log || { cat rapl.log; exit 1; }

"$PYTHON" - short.h5 good.h5 other.h5 rapl.h5 "$rapl/ticks" <<'PY'
import json, sys, h5py, numpy as np
ticks = int(open(sys.argv[5]).read())
names = sys.argv[1:5]
for name in names:  # the summary beside each file says what the file says
    f, j = h5py.File(name, "r"), json.load(open(name[:-3] + ".json"))
    a = f.attrs
    assert j["schema"] == "minilst-summary" and j["metrics_file"] == name, j
    assert j["verdict"] == ("VALID" if a["valid"] == "PASSED" else "INVALID"), (name, j["verdict"])
    assert j["reportable"] == a["reportable"], name
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
assert json.load(open("good.json"))["reportable"] == h5py.File("good.h5", "r").attrs["reportable"]
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
assert 0.5 <= e.sum() <= 0.5 * ticks + 1e-6, (e.sum(), ticks)  # the package's ticks only, wraps unwrapped
tpj = r.attrs["tokens_per_step"] * (4 - w) / e[w:].sum()
assert np.isclose(r.attrs["tokens_per_joule"], tpj) and np.isclose(json.load(open("rapl.json"))["energy"]["tokens_per_joule"], tpj)

# MLPerf-style event lines: JSON after ":::MLLOG ", the run's keys in order, its losses
for log, status in (("short.log", "success"), ("good.log", "success")):
    # a launcher may put another rank's unterminated output before a line: read from the marker on
    events = [json.loads(l[l.index(":::MLLOG ") + len(":::MLLOG "):]) for l in open(log) if ":::MLLOG " in l]
    keys = [e["key"] for e in events]
    assert keys[0] == "init_start" and keys[-1] == "run_stop" and "run_start" in keys, keys
    assert all({"namespace", "time_ms", "event_type", "key", "value", "metadata"} <= e.keys() for e in events)
    assert events[-1]["metadata"]["status"] == status
    losses = [e["value"] for e in events if e["key"] == "train_loss"]
    assert np.allclose(losses, h5py.File(log.replace(".log", ".h5"), "r")["loss"][:]), log
print("run rules, JSON summaries, MLPerf lines and energy: as expected")
PY
