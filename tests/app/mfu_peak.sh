#!/usr/bin/env bash
# MFU that holds still, and a loaded node caught (RUN_RULES.md):
#   1. three repeats of one deck divide by one stored host peak (results/mfu_peak.hpp): the first
#      run on an empty cache measures and stores it, the others read it (or, measuring 10% more,
#      replace it and say so); runs with the same peak report MFU / FOM alike to rounding, whatever
#      their own GEMM rates; the file records the peak's kind and source beside the run's GEMM rate;
#   2. a run beside two busy processes is not reportable, naming the load (other processes' cores),
#      the metrics file records the load, and the busy run leaves the stored peak as it was.
source "$(dirname "$0")/common.sh"
export MINILST_CACHE=$tmp/cache
deck=$MINILST_SOURCE/inputs/tiny.yaml
for i in 1 2 3; do
  "$MINILST" run "$deck" --set run.steps=60 --set output.metrics=r$i.h5 > r$i.log 2>&1 || { cat r$i.log; exit 1; }
done
grep -q "^peak for MFU: .* host (host peak measured in this run and stored in $MINILST_CACHE/host_peaks.json" r1.log \
  || { cat r1.log; echo "FAIL: the first run did not store the host peak"; exit 1; }
"$PYTHON" - <<'PY'
import h5py, json, os
runs = [dict(h5py.File(f"r{i}.h5", "r").attrs) for i in (1, 2, 3)]
text = lambda a, k: a[k].decode() if isinstance(a[k], bytes) else str(a[k])
store = json.load(open(os.path.join(os.environ["MINILST_CACHE"], "host_peaks.json")))
assert len(store) == 1, store
for i, a in enumerate(runs, 1):
    assert text(a, "mfu_peak_kind") == "host", (i, text(a, "mfu_peak_source"))
    assert a["peak_gflops_per_rank"] > 0 and a["mfu_peak_gflops_per_rank"] > 0
    ratio = a["mfu"] / a["fom"]
    print(f"run {i}: peak {a['mfu_peak_gflops_per_rank']:.3f} GFLOP/s ({text(a, 'mfu_peak_source')}), own GEMM rate "
          f"{a['peak_gflops_per_rank']:.3f}, MFU {a['mfu']:.4f}, FOM {a['fom']:.1f}, MFU/FOM {ratio:.6e}")
for i in (2, 3):
    prev, a = runs[i - 2], runs[i - 1]
    src = text(a, "mfu_peak_source")
    if "replacing" in src:  # it measured 10% more: the stored peak was low, and the run says so
        assert a["mfu_peak_gflops_per_rank"] > 1.1 * prev["mfu_peak_gflops_per_rank"], src
    else:
        assert src.startswith("host peak measured once"), src
        assert a["mfu_peak_gflops_per_rank"] == prev["mfu_peak_gflops_per_rank"], "the peak was re-timed"
        same = a["mfu"] / a["fom"], prev["mfu"] / prev["fom"]
        assert abs(same[0] / same[1] - 1) < 1e-9, f"MFU does not follow FOM alone: {same}"
PY
cp "$MINILST_CACHE/host_peaks.json" before.json

# 2. Beside two busy processes (on a 2-core node, more than a core of other work).
busy() { while :; do :; done; }
busy & b1=$!
busy & b2=$!
trap 'kill $b1 $b2 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$MINILST" run "$deck" --set run.steps=1500 --set output.metrics=busy.h5 > busy.log 2>&1 || { cat busy.log; exit 1; }
kill $b1 $b2
grep -Eq "^RESULT: VALID .*reportable=no \(.*node loaded: other processes used [0-9.]+ cores beside the run \(above 0.25" busy.log \
  || { cat busy.log; echo "FAIL: a run beside busy processes is reportable, or the load is not named"; exit 1; }
"$PYTHON" - <<'PY'
import h5py
a = h5py.File("busy.h5", "r").attrs
assert a["node_load_other_cores"] > 0.25, a["node_load_other_cores"]
assert "node loaded" in a["reportable_reasons"].decode() if isinstance(a["reportable_reasons"], bytes) else a["reportable_reasons"]
print("busy run: other processes", round(float(a["node_load_other_cores"]), 2), "cores")
PY
cmp before.json "$MINILST_CACHE/host_peaks.json" || { echo "FAIL: the busy run changed the stored peak"; exit 1; }
echo "PASS"
