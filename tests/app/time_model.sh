#!/usr/bin/env bash
# The time model (docs/time_model.md): `minilst probe` on 1 and 2 ranks writes a machine
# file that `plan --machine` accepts (positive times, the step the sum of its parts);
# implausible figures are refused (a link below the floor at probe time; a hand-made
# file with a GEMM below 1% of nominal) unless flagged; the shipped machine files load
# and scale sensibly (twice the GEMM rate shortens the compute phases, half the link
# bandwidth lengthens the all-to-alls); the 64-rank Llama-3-8B layout search answers in
# seconds; a bad machine file is refused naming its key.
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
"${mpi[@]}" "$MINILST" probe --out floor.yaml "${small[@]}" --link-floor-gbs 1e9 > floor.log 2> floor.err || status=$?
[[ $status -eq 3 ]] || { echo "FAIL: a link below the floor: exit $status, expected 3"; cat floor.err; exit 1; }
grep -q "implausible: links.intra_node" floor.err && [[ ! -e floor.yaml ]]
"${mpi[@]}" "$MINILST" probe --out two.yaml "${small[@]}" --link-floor-gbs 1e9 --allow-implausible > probe2.log 2>&1
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
open("fast.yaml", "w").write(fast)
slow = re.sub(r"(intra_node:.*?)(\n  inter_node)", lambda m: re.sub(r"gbs: (\d+)", lambda g: f"gbs: {int(g.group(1)) / 2}",
              m.group(1)) + m.group(2), text, flags=re.S)
open("halflinks.yaml", "w").write(slow)
PY
for m in base:"$h100" fast:fast.yaml half:halflinks.yaml; do
  "$MINILST" plan "$deck" --ranks 8 --machine "${m#*:}" --format json > "${m%%:*}.json"
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
grep -v "^elementwise_gbs" "$h100" | bad missing "elementwise_gbs: expected a number"
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
