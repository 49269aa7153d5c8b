#!/usr/bin/env bash
# The time model (docs/time_model.md): `minilst probe` on 1 and 2 ranks writes a machine
# file that `plan --machine` accepts (positive times, the step the sum of its parts);
# implausible figures are refused (a link below the floor at probe time; a hand-made
# file with a GEMM below 1% of nominal) unless flagged; the shipped machine files load
# and scale sensibly (twice the GEMM rate shortens the compute phases, half the link
# bandwidth lengthens the all-to-alls); the 64-rank Llama-3-8B layout search answers in
# seconds; a bad machine file is refused naming its key; a run given a machine file (run --machine,
# run.machine) records the prediction plan --machine makes beside its measured times, prints and
# stores their ratio, and a run whose machine file cannot be read or priced stops before any output;
# the calibration step's step_scale, the attention tiles' padding and sync_us each price what they
# say; run.machine: probe measures the job at start and keeps the file in the metrics.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON, MPIEXEC.
source "$(dirname "$0")/common.sh"
mpi=("${MPIEXEC:-mpiexec}" -n 2 --oversubscribe)
tiny="$MINILST_SOURCE/inputs/tiny.yaml"
h100="$MINILST_SOURCE/machines/h100-sxm-8gpu-ib400.yaml"
small=(--size 64 --repeats 2 --comm-mib 0.25)

# 1. probe on 1 rank; on 2 ranks with a link floor above any link: refused (exit 3, nothing
# written), then written with the links flagged (--allow-implausible); plan accepts both
"$MINILST" probe --out one.yaml "${small[@]}" > probe1.log
grep -q "^kind: measured" one.yaml && ! grep -q "^links:" one.yaml
status=0
"${mpi[@]}" "$MINILST" probe --out floor.yaml "${small[@]}" --link-floor-gbs 1e5 > floor.log 2> floor.err || status=$?
[[ $status -eq 3 ]] || { echo "FAIL: a link below the floor: exit $status, expected 3"; cat floor.err; exit 1; }
grep -q "implausible: links.intra_node" floor.err && [[ ! -e floor.yaml ]]
"${mpi[@]}" "$MINILST" probe --out two.yaml "${small[@]}" --link-floor-gbs 1e5 --allow-implausible > probe2.log 2>&1
grep -q "^implausible:" two.yaml && grep -q "intra_node:" two.yaml
"$MINILST" plan "$tiny" --machine one.yaml --format json > one.json
"$MINILST" plan "$tiny" --machine two.yaml --ranks 2 --set parallel.ring=2 --format json > ring.json 2> flagged.err
grep -q "flags an implausible figure" flagged.err
"$MINILST" plan "$tiny" --machine two.yaml --ranks 2 --set parallel.ulysses=2 --set memory.policy=checkpoint \
  --format json > ulysses.json 2> /dev/null
"$PYTHON" - <<'PY'
import json
for name in ("one", "ring", "ulysses"):
    p = json.load(open(f"{name}.json"))
    ph = p["predicted_phases"]
    assert p["predicted_step_s"] > 0 and p["predicted_tokens_per_s"] > 0 and 0 < p["predicted_mfu"], p
    parts = ph["forward"] + ph["backward"] + ph["comm"] + ph["optimizer"]
    assert abs(parts - p["predicted_step_s"]) <= 1e-5 * p["predicted_step_s"], (name, parts, p["predicted_step_s"])
    assert all(v >= 0 for v in ph.values()), ph
    assert ph["attention"] > 0 and ph["mlp"] > 0 and ph["lm_head"] > 0, ph
ring, uly = json.load(open("ring.json"))["predicted_phases"], json.load(open("ulysses.json"))["predicted_phases"]
assert ring["comm"] > 0 and uly["alltoall"] > 0 and uly["recompute"] > 0, (ring, uly)
print("probe files accepted; step = forward + backward + comm + optimizer; a link below the floor refused or flagged")
PY

# 2. hand-made files with implausible figures are refused unless flagged
# a hand-made file: bf16 square GEMM at 0.5% of its nominal 989000
sed 's/bf16: {square: 742000/bf16: {square: 4945/' "$h100" > slow.yaml
if "$MINILST" plan "$tiny" --machine slow.yaml 2> slow.err; then echo "FAIL: GEMM below 1% of nominal accepted"; exit 1; fi
grep -q "gemm_gflops.bf16.square: implausible" slow.err
sed 's/alltoall: {gbs: 40,/alltoall: {gbs: 0.5,/' "$h100" > slowlink.yaml
if "$MINILST" plan "$tiny" --machine slowlink.yaml 2> slowlink.err; then echo "FAIL: link below floor accepted"; exit 1; fi
grep -q "links.inter_node.alltoall: implausible" slowlink.err
echo "implausible figures refused"

# 3. shipped files: every one loads; twice the GEMM rate shortens compute, half the links lengthen all-to-alls
deck="$MINILST_SOURCE/inputs/llama3_8b.yaml"
for m in "$MINILST_SOURCE"/machines/*.yaml; do "$MINILST" plan "$deck" --ranks 8 --machine "$m" --format json > /dev/null; done
"$PYTHON" - "$h100" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
fast = re.sub(r"(gemm_gflops:.*?)(\nattention_gflops)", lambda m: re.sub(r"(square|projection|mlp|lm_head): (\d+)",
              lambda g: f"{g.group(1)}: {2 * int(g.group(2))}", m.group(1)) + m.group(2), text, flags=re.S)
# a machine with twice the GEMM rates has twice their nominal peak (a rate above its file's own
# nominal is refused) and is no longer the datasheet's H100
fast = re.sub(r"(nominal:\n  gemm_gflops: \{)([^}]*)\}", lambda m: m.group(1) + re.sub(r": (\d+)", lambda g: f": {2 * int(g.group(1))}",
              m.group(2)) + "}", fast)
fast = re.sub(r"^device: .*\n", "", fast, flags=re.M)
open("fast.yaml", "w").write(fast)
slow = re.sub(r"(intra_node:.*?)(\n  inter_node)", lambda m: re.sub(r"gbs: (\d+)", lambda g: f"gbs: {int(g.group(1)) / 2}",
              m.group(1)) + m.group(2), text, flags=re.S)
open("halflinks.yaml", "w").write(slow)
PY
for m in base:"$h100" fast:fast.yaml half:halflinks.yaml; do  # (Ulysses over every head at once: its calls'
  # bytes all exposed, as the bandwidth check wants; the chunks' calls are latency and their gathers hidden)
  "$MINILST" plan "$deck" --ranks 8 --set parallel.ulysses_head_chunks=1 --machine "${m#*:}" --format json \
    > "${m%%:*}.json"
done
"$PYTHON" - <<'PY'
import json
b, f, h = (json.load(open(f"{n}.json"))["predicted_phases"] for n in ("base", "fast", "half"))
for k in ("mlp", "lm_head"):
    assert 0 < f[k] < b[k], (k, f[k], b[k])
assert f["step"] < b["step"] and h["alltoall"] > 1.2 * b["alltoall"] and h["step"] > b["step"], (b, f, h)
print(f"x2 GEMM: mlp {b['mlp']:.3g} -> {f['mlp']:.3g} s; x0.5 links: alltoall {b['alltoall']:.3g} -> {h['alltoall']:.3g} s")
PY

# 4. the 64-rank layout search answers in seconds with a ranked table
start=$(date +%s.%N)
"$MINILST" plan "$deck" --machine "$h100" --ranks 64 --device h100-80gb --max-seq-len > search.txt
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
grep -q "^  1  " search.txt && grep -q "tokens/s" search.txt
echo "64-rank search: ${elapsed} s"; sed -n 1,4p search.txt
awk -v t="$elapsed" 'BEGIN { exit !(t < 30) }'

# 5. bad machine files name their key
bad() {  # bad NAME KEY-IN-MESSAGE < file
  cat > "$1.yaml"
  if "$MINILST" plan "$tiny" --machine "$1.yaml" 2> "$1.err"; then echo "FAIL: $1 accepted"; exit 1; fi
  grep -q -- "$2" "$1.err" || { echo "FAIL: $1: no '$2' in:"; cat "$1.err"; exit 1; }
}
grep -v "^elementwise_gbs" "$h100" | bad missing "elementwise_gbs: missing: expected a number"
sed 's/^op_overhead_us: 5/op_overhead_us: fast/' "$h100" | bad nan "op_overhead_us: expected a number"
sed 's/^ranks_per_node: 8/ranks_per_node: 8\nflops: 3/' "$h100" | bad unknown "flops: unknown key"
sed 's/    p2p: {gbs: 360, latency_us: 5}/    p2p: {gbs: -3, latency_us: 5}/' "$h100" | bad negative "links.intra_node.p2p.gbs: must be > 0"
grep -v "^  elementwise_gbs:" "$h100" | bad provenance "no provenance for elementwise_gbs"
echo "not: a machine file" | bad notschema "not: unknown key"
printf "schema: minilst-machine\nschema_version: 2\n" | bad version "schema_version: expected 1"
if "$MINILST" plan "$tiny" --machine does-not-exist.yaml 2> absent.err; then exit 1; fi
grep -q "cannot be read" absent.err
"$MINILST" plan "$tiny" --machine one.yaml --ranks 2 --set parallel.ring=2 2> nolinks.err && exit 1
grep -q "links.inter_node.p2p is missing" nolinks.err  # one rank per node in a 1-rank probe
echo "bad machine files refused naming the key"

# 6. a run checks its prediction: --machine (or run.machine) records /predicted/<phase>, equal to what
# plan --machine predicts for the same deck and ranks (one.json, ring.json above), with the measured
# side and the ratio; the summary line and the JSON carry the step's ratio; predicted_vs_measured.py
# reads the metrics alone. Without a machine: no /predicted, no prediction in the JSON or the log.
"$MINILST" run "$tiny" --machine one.yaml --set output.metrics=self1.h5 > self1.log
"${mpi[@]}" "$MINILST" run "$tiny" --set parallel.ring=2 --set run.machine=absent.yaml --machine two.yaml \
  --set output.metrics=self2.h5 > self2.log 2> self2.err  # --machine wins over the deck's run.machine
grep -q "run.machine: two.yaml flags an implausible figure" self2.err
"$MINILST" run "$tiny" --set output.metrics=plain.h5 > plain.log
"$PYTHON" - <<'PY'
import json, re
import h5py

def fnv1a(path):
    h = 14695981039346656037
    for b in open(path, "rb").read():
        h = ((h ^ b) * 1099511628211) % 2**64
    return f"{h:016x}"

for name, plan_json, machine in (("self1", "one.json", "one.yaml"), ("self2", "ring.json", "two.yaml")):
    plan = json.load(open(plan_json))["predicted_phases"]
    with h5py.File(f"{name}.h5", "r") as f:
        assert all(isinstance(f["timings"][k], h5py.Dataset) for k in f["timings"]), "/timings holds datasets only"
        g = f["predicted"]
        assert g.attrs["machine_file"] == machine and g.attrs["machine_digest"] == fnv1a(machine), dict(g.attrs)
        assert g.attrs["machine"] == json.load(open(plan_json))["machine"]["name"], dict(g.attrs)
        assert set(g) == set(plan), (set(g), set(plan))
        for k, v in plan.items():
            p = float(g[k][()])
            assert p >= 0 and abs(p - v) <= 1e-6 * max(abs(v), 1e-300), (name, k, p, v)  # plan prints 7 digits
            measured = f["timings"][k].attrs["Max time/rank"]
            assert g[k].attrs["measured"] == measured, (name, k)
            if measured > 0:
                assert abs(g[k].attrs["ratio"] - p / measured) <= 1e-12 * p / measured, (name, k)
            else:
                assert "ratio" not in g[k].attrs, (name, k)
        step, measured = float(g["step"][()]), float(g["step"].attrs["measured"])
        assert step > 0 and measured > 0
    j = json.load(open(f"{name}.json"))["prediction"]
    assert j["step_s"] == step and j["measured_step_s"] == measured and j["machine"]["digest"] == fnv1a(machine), j
    assert abs(j["ratio"] - step / measured) <= 1e-12 * j["ratio"], j
    line = re.search(r"predicted step (\S+) s, measured (\S+) s \((\S+)x\) on (\S+)", open(f"{name}.log").read())
    assert line, f"{name}.log: no 'predicted step ... measured ... (..x)' line"
    shown = [float(x) for x in line.groups()[:3]]
    assert abs(shown[0] - step) <= 5e-4 * step and abs(shown[1] - measured) <= 5e-4 * measured, (shown, step, measured)
    assert abs(shown[2] - step / measured) <= 0.005 + 1e-9, (shown, step / measured)
    print(f"{name}: predicted step {step:.4g} s, measured {measured:.4g} s ({step / measured:.2f}x): as plan --machine")
with h5py.File("plain.h5", "r") as f:
    assert "predicted" not in f
    # the run plans the deck once (predict/prediction.hpp), with or without a machine file, on any ranks
    for name in ("plain", "self1", "self2"):
        with h5py.File(f"{name}.h5", "r") as g:
            assert g.attrs["deck_plans"] == 1 and g.attrs["rank_remodels"] == 0, (name, dict(g.attrs))
            assert g.attrs["phases"].split()[0] == "step" and set(g.attrs["phases"].split()) == set(g["timings"]), name
assert "prediction" not in json.load(open("plain.json"))
assert "predicted" not in open("plain.log").read() and "prediction:" not in open("plain.log").read()
print("no machine file: no prediction recorded")
PY
"$PYTHON" "$MINILST_SOURCE/analysis/predicted_vs_measured.py" self1.h5 ring=self2.h5 one=one.json,self1.h5 \
  --png self.png > table.txt
if ! { grep -q "^self1 " table.txt && grep -q "^ring " table.txt && grep -q "^one " table.txt &&
       grep -q "of 3 runs" table.txt && [[ -s self.png ]]; }; then
  echo "FAIL: predicted_vs_measured.py"; cat table.txt; exit 1
fi
# rounds of one configuration (the same NAME) read as one row: each side's median, the measured spread
"$PYTHON" "$MINILST_SOURCE/analysis/predicted_vs_measured.py" r=self1.h5 r=self2.h5 r=self1.h5 > rounds.txt
"$PYTHON" - <<'PY'
import h5py
step = {}
for f in ("self1.h5", "self2.h5"):
    with h5py.File(f, "r") as h:
        step[f] = (float(h["predicted/step"][()]), float(h["timings/step"].attrs["Max time/rank"]))
rows = [l.split() for l in open("rounds.txt") if l.startswith("r ")]
assert len(rows) == 1 and "of 1 runs" in open("rounds.txt").read(), open("rounds.txt").read()
pred, meas, n, spread = float(rows[0][1]), float(rows[0][2]), rows[0][4], float(rows[0][5].lstrip("x"))
want_spread = max(m for _, m in step.values()) / min(m for _, m in step.values())
assert abs(pred / step["self1.h5"][0] - 1) < 1e-3 and abs(meas / step["self1.h5"][1] - 1) < 1e-3, (pred, meas, step)
assert n == "3," and abs(spread - want_spread) < 0.006, (n, spread, want_spread)
steady = [l for l in open("rounds.txt") if "where the rounds agree within x1.10" in l]
assert len(steady) == 1 and steady[0].rstrip().endswith(f"of {int(want_spread <= 1.10)} runs"), (steady, want_spread)
print(f"rounds: the median of 3 rounds, spread x{spread}")
PY
if "$PYTHON" "$MINILST_SOURCE/analysis/predicted_vs_measured.py" plain.h5 > noprediction.txt 2>&1; then
  echo "FAIL: a metrics file without a prediction accepted"; exit 1
fi
grep -q "no /predicted" noprediction.txt

# 7. a machine file that cannot be read, is not one, or cannot price the layout stops the run on
# every rank before any output (exit 2), naming run.machine and the file
refused() {  # refused NAME MESSAGE LAUNCH... : the run exits 2, says MESSAGE, writes nothing
  local name=$1 message=$2 status=0
  shift 2
  "$@" --set output.metrics="$name.h5" > "$name.log" 2> "$name.err" || status=$?
  [[ $status -eq 2 ]] || { echo "FAIL: $name: exit $status, expected 2"; cat "$name.err"; exit 1; }
  grep -q -- "$message" "$name.err" || { echo "FAIL: $name: no '$message' in:"; cat "$name.err"; exit 1; }
  for file in "$name".*; do
    [[ $file == "$name.log" || $file == "$name.err" ]] || { echo "FAIL: $name: wrote $file"; exit 1; }
  done
}
refused absent "run.machine: machine file absent.yaml: cannot be read" "$MINILST" run "$tiny" --machine absent.yaml
refused notone "run.machine: machine file notschema.yaml: not: unknown key" \
  "$MINILST" run "$tiny" --set run.machine=notschema.yaml
refused absent2 "run.machine: machine file absent.yaml: cannot be read" \
  "${mpi[@]}" "$MINILST" run "$tiny" --set parallel.ring=2 --machine absent.yaml
refused nolinks2 "run.machine: machine file one.yaml: cannot price this deck on 2 rank(s).*links.inter_node.p2p" \
  "${mpi[@]}" "$MINILST" run "$tiny" --set parallel.ring=2 --machine one.yaml
echo "a run's machine file: refused before any output when it cannot be read or priced"

# 8. the probe's calibration step and the attention tiles: the probe writes step_scale for every
# precision (each family inside [0.2, 10], with its provenance) and the attention problem it
# timed; a family's factor multiplies that family's predicted time alone (mlp x 2 doubles the mlp
# phase); the portable kernel's padded tiles price 3 query heads per kv head at 80/66 the time per
# useful FLOP of 2 (kernels/attention_tiles.hpp), and nothing changes without the probed problem;
# a factor outside [0.2, 10] is refused naming it.
"$PYTHON" - <<'PY'
import re
text = open("one.yaml").read()
block = re.search(r"\nstep_scale:[^\n]*\n((?:  \S[^\n]*\n)+)", text).group(1)
scales = dict(re.findall(r"  (\w+): \{([^}]*)\}", block))
assert set(scales) == {"float", "bf16", "double"}, scales
for prec, body in scales.items():
    fam = {k: float(v) for k, v in re.findall(r"(\w+): ([-\d.e+]+)", body)}
    assert set(fam) == {"attention", "mlp", "lm_head", "other", "optimizer"}, (prec, fam)
    assert all(0.2 <= v <= 10 for v in fam.values()), (prec, fam)
    assert re.search(rf"\n  step_scale\.{prec}: \"measured: a training step", text), prec
assert re.search(r"\nattention_probe:[^\n]*\n  heads_per_kv: 2\n  head_dim: 64\n  second_head_dim: 32\n  kernel: \{[^}]*float: portable", text)
unit = re.sub(r"(\nstep_scale:[^\n]*\n)((?:  \S[^\n]*\n)+)",
              lambda m: m.group(1) + re.sub(r"(\w+): [-\d.e+]+(?=[,}])", r"\1: 1", m.group(2)), text)
unit = re.sub(r"\nop_overhead_us: \S+", "\nop_overhead_us: 0", unit)
open("unit.yaml", "w").write(unit)
# one head dim: the second one's rates gone (the tiles price other head dims)
onept = re.sub(r"\nattention_second_gflops:[^\n]*\n(  [^\n]*\n)+", "\n", re.sub(r"\n  second_head_dim: \d+", "", unit))
open("onept.yaml", "w").write(onept)
open("mlp2.yaml", "w").write(re.sub(r"(\n  double: \{attention: 1, )mlp: 1", r"\1mlp: 2", onept))  # tiny is double
open("noprobe.yaml", "w").write(re.sub(r"\nattention_probe:[^\n]*\n(  [^\n]*\n)+", "\n", onept))
open("scale5.yaml", "w").write(re.sub(r"(\n  float: \{attention: 1, )mlp: 1", r"\1mlp: 12", unit))
PY
grep -q "mlp: 2" mlp2.yaml && ! grep -q "^attention_probe" noprobe.yaml && ! grep -q "second" onept.yaml
for m in unit onept mlp2 noprobe; do
  for g in g2:"--set model.hidden=64" g3:"--set model.hidden=96 --set model.heads=6"; do
    # shellcheck disable=SC2086
    "$MINILST" plan "$tiny" --set run.seq_len=512 ${g#*:} --machine "$m.yaml" --format json > "$m-${g%%:*}.json"
  done
done
"$PYTHON" - <<'PY'
import json
import re
ph = {f"{m}-{g}": json.load(open(f"{m}-{g}.json"))["predicted_phases"] for m in ("unit", "onept", "mlp2", "noprobe") for g in ("g2", "g3")}
close = lambda a, b, rel=1e-5: abs(a - b) <= rel * abs(b)
for g in ("g2", "g3"):
    u, m2 = ph[f"onept-{g}"], ph[f"mlp2-{g}"]
    assert close(m2["mlp"], 2 * u["mlp"]), (g, m2["mlp"], u["mlp"])
    assert all(close(m2[k], u[k]) for k in ("attention", "lm_head", "optimizer")), (g, m2, u)
assert close(ph["onept-g2"]["attention"], ph["noprobe-g2"]["attention"]), "2 query heads per kv: the probed tiles"
ratio = ph["onept-g3"]["attention"] / ph["noprobe-g3"]["attention"]
assert close(ratio, 80 / 66, 1e-4), ratio
# two head dims (64 and 32, the probe's): head dim 16 priced on the line t(h) = c0 + c1 h per pass
text = open("unit.yaml").read()
rates = lambda key: dict(re.findall(r"(forward|backward): ([\d.e+-]+)", re.search(rf"\n{key}:[^\n]*\n(?:  [^\n]*\n)*?  double: \{{([^}}]*)\}}", text).group(1)))
r1, r2 = rates("attention_gflops"), rates("attention_second_gflops")
def per_flop(p, h=16, h1=64, h2=32):
    t1, t2 = h1 / float(r1[p]), h2 / float(r2[p])
    c1 = (t2 - t1) / (h2 - h1); c0 = t1 - c1 * h1
    if c0 < 0: c0, c1 = 0, t1 / h1
    return (c0 + c1 * h) / h  # seconds per useful FLOP at h (t1 / h1 = 1 / R1 at the probe's)
want = (4 * per_flop("forward") + 10 * per_flop("backward")) / (4 / float(r1["forward"]) + 10 / float(r1["backward"]))
line = ph["unit-g2"]["attention"] / ph["onept-g2"]["attention"]
assert close(line, want, 1e-4), (line, want)
print(f"step_scale multiplies its family; 3 query heads per kv head: attention x {ratio:.4f} (80/66); "
      f"head dim 16 from the probe's 64 and 32: attention x {line:.4f} of one head dim's")
PY
if "$MINILST" plan "$tiny" --machine scale5.yaml 2> scale5.err; then echo "FAIL: step_scale 12 accepted"; exit 1; fi
grep -q "step_scale.float.mlp: implausible" scale5.err || { cat scale5.err; exit 1; }
echo "the calibration step's factors and the attention tiles priced; a factor out of range refused"

# 9. sync_us, the wait of a call that follows compute: a probe on 2 ranks measures it for every
# collective; the model adds it to every call (16 all-to-alls a step for 2 layers of Ulysses with
# full memory: 16 ms more at 1000 us a call than at 0)
grep -qE "^    alltoall: \{gbs: [^,]+, latency_us: [^,}]+(, sync_us: [^}]+)?\}" two.yaml
grep -q "sync_us: the mean time of the one-float call after" two.yaml
"$PYTHON" - <<'PY'
import re
text = open("two.yaml").read()
for us in (0, 1000):
    t = re.sub(r"(\n    alltoall: \{gbs: [^,]+, latency_us: [^,}]+)(, sync_us: [^}]+)?\}", rf"\1, sync_us: {us}}}", text)
    open(f"sync{us}.yaml", "w").write(t)
PY
for us in 0 1000; do
  "$MINILST" plan "$tiny" --machine "sync$us.yaml" --ranks 2 --set parallel.ulysses=2 --format json > "sync$us.json" 2> /dev/null
done
"$PYTHON" - <<'PY'
import json
a, b = (json.load(open(f"sync{us}.json"))["predicted_phases"]["alltoall"] for us in (0, 1000))
assert abs((b - a) - 16e-3) <= 1e-6, (a, b)
print(f"sync_us 1000 on the all-to-all: {a:.4g} -> {b:.4g} s a step (16 calls)")
PY

# 10. run.machine: probe: the run measures its own ranks first and keeps the machine file in the
# metrics (machine_yaml); that file, written out, loads and prices the deck as recorded (to the
# file's 6 significant digits)
"$MINILST" run "$tiny" --machine probe --set output.metrics=probed.h5 > probed.log
grep -q "run.machine: probe: measuring this job's ranks first" probed.log
"$PYTHON" - <<'PY'
import h5py
with h5py.File("probed.h5", "r") as f:
    g = f["predicted"]
    assert g.attrs["machine_file"] == "probe" and g.attrs["machine_kind"] == "measured", dict(g.attrs)
    text = g.attrs["machine_yaml"]
    text = text.decode() if isinstance(text, bytes) else text
    assert "step_scale:" in text and "head_dim: 10" in text, text[:400]  # tiny: hidden 40, 4 heads
    open("probed.yaml", "w").write(text)
    h = 14695981039346656037
    for b in text.encode():
        h = ((h ^ b) * 1099511628211) % 2**64
    assert g.attrs["machine_digest"] == f"{h:016x}", (g.attrs["machine_digest"], f"{h:016x}")
    open("probed_step.txt", "w").write(repr(float(g["step"][()])))
PY
"$MINILST" plan "$tiny" --machine probed.yaml --format json > probed.json
"$PYTHON" - <<'PY'
import json
recorded, planned = float(open("probed_step.txt").read()), json.load(open("probed.json"))["predicted_step_s"]
assert abs(recorded - planned) <= 1e-4 * planned, (recorded, planned)  # the file keeps 6 significant digits
print(f"run.machine: probe: measured at start, kept in the metrics, priced as plan --machine prices it ({planned:.4g} s)")
PY

# 11. the probe refuses a head dim no deck can have (odd: RoPE rotates pairs) before measuring anything
status=0
"$MINILST" probe --out odd.yaml --head-dim 3 > odd.log 2> odd.err || status=$?
[[ $status -eq 2 && ! -e odd.yaml ]] && grep -q -- "--head-dim even in \[2, 256\]" odd.err ||
  { echo "FAIL: probe --head-dim 3: exit $status"; cat odd.err; exit 1; }
echo "an odd head dim refused"
