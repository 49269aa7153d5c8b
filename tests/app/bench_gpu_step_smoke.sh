#!/usr/bin/env bash
# scripts/bench/gpu_step.sh end to end in its CPU mode (the host build and PyTorch on
# the CPU; the tiny deck in bf16, two sequence lengths, one round): a ratio line per
# S, the table file holds both sides' phases, ratios and MFU and the device, the PNG
# exists. Then the benchmark's own deck, inputs/llama3_8b_layer.yaml: accepted, and
# predicted to fit an 80 GB GPU at both S the docs run it at.
# Environment (set by ctest): MINILST_BIN_DIR, MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
OUT="$tmp/bench" bash "$MINILST_SOURCE/scripts/bench/gpu_step.sh" "$MINILST_SOURCE/inputs/tiny.yaml" --device cpu \
  --rounds 1 --seq-lens 37,64 --set run.precision=bf16 --set run.steps=3 > bench.log 2>&1 || { cat bench.log; exit 1; }
grep "ratio miniLST/PyTorch" bench.log
[[ $(grep -c "ratio miniLST/PyTorch" bench.log) == 2 ]] || { cat bench.log; echo "FAIL: a ratio line per S"; exit 1; }
"$PYTHON" - "$tmp/bench/gpu_step_bench.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
phases = ("step", "attention", "mlp", "lm_head")
need = [f"{i}/{p}_{q}" for i in ("minilst", "pytorch") for p in phases for q in ("s", "mfu")]
need += [f"ratio/{p}" for p in ("step", "attention", "mlp", "lm_head", "optimizer")]
missing = [n for n in need if n not in f]
ok = not missing and list(f["seq_lens"][:]) == [37, 64] and np.all(f["ratio/step"][:] > 0)
ok = ok and np.all(f["minilst/step_mfu"][:] > 0) and f.attrs["device"]
ok = ok and f.attrs["pytorch_attention"] in ("sdpa", "explicit")
print(f"gpu_step_bench.h5: ratio {f['ratio/step'][:]} on {f.attrs['device']}, missing {missing}", "" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
test -s "$tmp/bench/gpu_step_bench.png"
for S in 16384 65536; do
  "$MINILST" plan "$MINILST_SOURCE/inputs/llama3_8b_layer.yaml" --set run.seq_len=$S --format json > plan.json
  "$PYTHON" - plan.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
mib = p["memory_bytes"]["device_total"] / 2**20
print(f"llama3_8b_layer at S = {p['seq_len']}: {mib:.0f} MiB on the device, {p['precision']}, 1 rank")
sys.exit(0 if mib <= 81920 and p["ranks"] == 1 and p["precision"] == "bf16" else 1)
PY
done
