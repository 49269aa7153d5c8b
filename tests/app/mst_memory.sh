#!/usr/bin/env bash
# Mini-sequences shrink memory: V=16384, d=64, S=4096 (float, 2 layers), once
# unchunked (mst.*_chunks=1) and once with 16 MLP and LM-head chunks. Checks
# (mst_memory.py): the chunked device_total high-water is at most a quarter of
# the unchunked one, the measured workspace is within 10% of the analytic
# prediction stored in /memory/model/workspace, and both runs agree on the loss.
# The same with memory.policy offload (alpha 1, 4 layers), whose MLP keeps its [S, I]
# tensors only unchunked: chunked, the activations lose exactly the two rounding
# buffers' MLP tensors, 2 S (d + 3I) T, and memory equals the model to the byte.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
deck=(run "$MINILST_SOURCE/inputs/tiny.yaml" --set model.vocab=16384 --set model.hidden=64 --set model.heads=4
      --set model.kv_heads=2 --set model.intermediate=172 --set run.seq_len=4096 --set run.precision=float
      --set run.steps=1 --set run.warmup_steps=0)
for m in 1 16; do
  "$MINILST" "${deck[@]}" --set mst.mlp_chunks=$m --set mst.lm_head_chunks=$m --set output.metrics=m$m.h5 > m$m.log
  grep -E "^mst:|^RESULT" m$m.log
  "$MINILST" "${deck[@]}" --set mst.mlp_chunks=$m --set mst.lm_head_chunks=$m --set model.layers=4 \
    --set memory.policy=offload --set memory.offload_alpha=1 --set output.metrics=o$m.h5 > o$m.log
  grep -E "^RESULT" o$m.log
done
"$PYTHON" - <<'PY'
import h5py, sys
one, many = h5py.File("m1.h5", "r"), h5py.File("m16.h5", "r")
mib = lambda f, k: f[k][0] / 2**20
failures = 0
def check(ok, what):
    global failures
    print(("ok:   " if ok else "FAIL: ") + what)
    failures += not ok
check(int(many.attrs["mlp_chunks"]) == 16 and int(many.attrs["lm_head_chunks"]) == 16, "16 chunks recorded")
r = many["memory/device_total"][0] / one["memory/device_total"][0]
check(r <= 0.25, f"device_total {mib(many, 'memory/device_total'):.1f} MiB chunked vs "
                 f"{mib(one, 'memory/device_total'):.1f} MiB unchunked: ratio {r:.3f} <= 0.25")
for f, name in ((one, "unchunked"), (many, "16 chunks")):
    w, m = f["memory/workspace"][0], f["memory/model/workspace"][0]
    check(abs(w - m) <= 0.10 * m, f"{name}: workspace {w / 2**20:.2f} MiB measured vs {m / 2**20:.2f} MiB model")
check(one["memory/workspace"][0] > 8 * many["memory/workspace"][0], "workspace falls with M")
check(abs(one["loss"][0] - many["loss"][0]) <= 1e-5 * abs(one["loss"][0]), "same loss (float)")
o1, o16 = h5py.File("o1.h5", "r"), h5py.File("o16.h5", "r")
S, d, I = 4096, 64, 172
drop = o1["memory/activations"][0] - o16["memory/activations"][0]
check(drop == 2 * S * (d + 3 * I) * 4, f"offload: chunked activations {mib(o16, 'memory/activations'):.2f} MiB, "
      f"unchunked {mib(o1, 'memory/activations'):.2f} MiB: the MLP's tensors of two rounding buffers gone")
for f, name in ((o1, "offload unchunked"), (o16, "offload, 16 chunks")):
    for c in ("activations", "workspace", "host_offload", "device_total"):
        check(f["memory/" + c][0] == f["memory/model/" + c][0], f"{name}: {c} measured == model")
check(o16["memory/device_total"][0] <= 0.25 * o1["memory/device_total"][0], "offload: device_total chunked <= 1/4")
check(abs(o1["loss"][0] - o16["loss"][0]) <= 1e-5 * abs(o1["loss"][0]), "offload: same loss (float)")
sys.exit(1 if failures else 0)
PY
