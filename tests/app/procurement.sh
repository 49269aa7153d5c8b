#!/usr/bin/env bash
# The procurement report end to end (docs/procurement.md): this host probed once (2 ranks, small
# sizes; its progress lines checked), 3 repeats of 2 decks (tiny, default at S = 256) on 1 and 2 ranks,
# plans of each point on the probe's machine file and on the shipped H100 machine file, then
# analysis/procurement_report.py:
#   - Markdown, CSV and HTML from one call; each measured row has 3 runs, min <= median <= max and a
#     95% confidence interval that scipy recomputes from the metrics files; the projected range is the
#     plan's tokens/s per rank widened by the time model's stated error; MFU in its three labelled
#     conventions, measured (over the stored host peak) and projected; the phase that bounds the step;
#   - provenance: the report's date, the runs' miniLST version and commit, the build, the machine
#     files' names, kinds and digests (the plans' own), the deck digests, the host;
#   - the HTML renders in headless Chromium: its title, both tables and both plots (each image decoded
#     by the browser, checked by a script added to a copy) and a screenshot that is not blank.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
export MINILST_CACHE=$tmp/cache OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
launch() { if (($1 == 1)); then shift; "$@"; else local n=$1; shift; "${MPIEXEC:-mpiexec}" --oversubscribe -n "$n" "$@"; fi; }
fail() { echo "FAIL: $*"; exit 1; }
command -v chromium > /dev/null || fail "no chromium (scripts/setup.sh installs it)"

MINILST_PROGRESS_SECONDS=0.25 launch 2 "$MINILST" probe --out probe.yaml --size 32 --repeats 1 --head-dim 16 > probe.log \
  2> probe.err || { cat probe.log probe.err; fail "probe"; }
# the probe's progress (core/progress.hpp): a line every MINILST_PROGRESS_SECONDS on stderr, nothing else there
grep -Eq "^probe: GEMM rates measured; the next part \(elapsed [0-9]+:[0-9]{2}:[0-9]{2}\)$" probe.err \
  || { cat probe.err; fail "probe: no progress line"; }
[[ $(grep -c "elapsed" probe.err) == $(grep -c "" probe.err) ]] || { cat probe.err; fail "probe: other lines on stderr"; }
h100=$MINILST_SOURCE/machines/h100-sxm-8gpu-ib400.yaml
mkdir runs plans
for deck in tiny default; do
  for n in 1 2; do
    if ((n == 1)); then sets=(--set parallel.ulysses=1 --set parallel.ring=1); else sets=(--set parallel.ulysses=2 --set parallel.ring=1); fi
    sets+=(--set run.steps=4 --set run.warmup_steps=1)
    # default at a quarter of its length (the test's time), without its reference (computed at 1024)
    [[ $deck == default ]] && sets+=(--set run.seq_len=256 --set reference.losses= --set reference.problem=)
    for i in 1 2 3; do
      launch $n "$MINILST" run "$MINILST_SOURCE/inputs/$deck.yaml" "${sets[@]}" --set output.metrics=runs/${deck}_${n}_$i.h5 \
        > runs/${deck}_${n}_$i.log 2>&1 || { cat runs/${deck}_${n}_$i.log; fail "run $deck $n $i"; }
    done
    for m in probe.yaml "$h100"; do
      "$MINILST" plan "$MINILST_SOURCE/inputs/$deck.yaml" --ranks $n "${sets[@]}" --machine "$m" --format json \
        > plans/${deck}_${n}_$(basename "$m" .yaml).json || fail "plan $deck $n $m"
    done
  done
done
args=()
for p in plans/*.json; do args+=(--plan "$p"); done
"$PYTHON" "$MINILST_SOURCE/analysis/procurement_report.py" "${args[@]}" --runs runs --csv report.csv --html report.html \
  > report.md 2> report.err || { cat report.md report.err; fail "the report"; }
cat report.md

"$PYTHON" - <<'PY'
import csv, glob, json, math, re, statistics
import h5py
from scipy import stats
md = open("report.md").read()
rows = list(csv.DictReader(open("report.csv")))
bad = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    ok or bad.append(what)
host = next(r["system"] for r in rows if r["valid_runs"] == "3")
for deck in ("tiny", "default"):
    for n in (1, 2):
        r = [x for x in rows if x["system"] == host and x["deck"] == deck and x["ranks"] == str(n)]
        check(len(r) == 1, f"one row for {deck} on {n} rank(s) on {host}")
        if not r:
            continue
        r = r[0]
        foms = [float(h5py.File(f, "r").attrs["fom"]) for f in sorted(glob.glob(f"runs/{deck}_{n}_*.h5"))]
        f = lambda k: float(r[k])
        check(r["valid_runs"] == "3" and r["failed_runs"] == "0", f"{deck} {n}: 3 VALID runs")
        check(math.isclose(f("demonstrated_tokens_per_s_per_rank"), statistics.median(foms), rel_tol=1e-9)
              and math.isclose(f("demonstrated_min"), min(foms), rel_tol=1e-9)
              and math.isclose(f("demonstrated_max"), max(foms), rel_tol=1e-9), f"{deck} {n}: min, median, max")
        lo, hi = stats.t.interval(0.95, 2, loc=statistics.fmean(foms), scale=statistics.stdev(foms) / math.sqrt(3))
        check(math.isclose(f("demonstrated_ci_low"), lo, rel_tol=1e-9) and math.isclose(f("demonstrated_ci_high"), hi, rel_tol=1e-9),
              f"{deck} {n}: the 95% confidence interval of the mean")
        plan = json.load(open(f"plans/{deck}_{n}_probe.json"))
        p = plan["predicted_tokens_per_s"] / n
        check(math.isclose(f("projected_tokens_per_s_per_rank"), p, rel_tol=1e-9)
              and math.isclose(f("projected_low"), p / 1.15, rel_tol=1e-9) and math.isclose(f("projected_high"), p / 0.85, rel_tol=1e-9),
              f"{deck} {n}: projected with the model's stated error")
        for c in ("model", "hardware", "square"):
            mfus = [float(h5py.File(x, "r").attrs[f"mfu_{c}"]) for x in sorted(glob.glob(f"runs/{deck}_{n}_*.h5"))]
            check(math.isclose(f(f"mfu_{c}"), statistics.median(mfus), rel_tol=1e-9)
                  and math.isclose(f(f"projected_mfu_{c}"), plan["predicted_mfu_conventions"][c], rel_tol=1e-9),
                  f"{deck} {n}: MFU {c}, measured and projected")
        # the host's stored peak, or this run's rate where another test kept the node busy while it was measured
        check(r["mfu_peak"] in ("host", "host, run", "run") and r["bound"] != "-" and r["projected_bound"] != "-",
              f"{deck} {n}: MFU's peak ({r['mfu_peak']}), the bounding phases")
h100 = [x for x in rows if x["system"] == "h100-sxm-8gpu-ib400"]
check(len(h100) == 4 and all(float(x["projected_tokens_per_s_per_rank"]) > 0 and x["valid_runs"] == "0" for x in h100),
      "the H100 machine file's projections, one row per point")
probe_digest = json.load(open("plans/tiny_1_probe.json"))["machine"]["digest"]
h100_digest = json.load(open("plans/tiny_1_h100-sxm-8gpu-ib400.json"))["machine"]["digest"]
version = h5py.File("runs/tiny_1_1.h5", "r").attrs["version"]
deck_digest = h5py.File("runs/tiny_1_1.h5", "r").attrs["problem_digest"]
for what, text in (("made date", re.search(r"Made \d{4}-\d\d-\d\d \d\d:\d\d UTC", md)), ("probe digest", probe_digest in md),
                   ("H100 file digest", h100_digest in md), ("version", str(version) in md), ("deck digest", str(deck_digest) in md),
                   ("build", "Release" in md or "Debug" in md or "RelWithDebInfo" in md), ("conventions", "MFU model" in md and "MFU square" in md)):
    check(bool(text), f"markdown provenance and labels: {what}")
if bad:
    raise SystemExit(f"{len(bad)} check(s) failed")
PY

# The HTML in headless Chromium: what it shows (the DOM after loading, a script added to a copy reports
# whether each image decoded) and a screenshot that is not blank.
sed 's#</body>#<script>document.body.setAttribute("data-images", Array.from(document.images).map(i => i.complete \&\& i.naturalWidth > 0 ? "decoded" : "broken").join(","));</script></body>#' \
  report.html > probe_page.html
chrome=(chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --virtual-time-budget=5000)
timeout 120 "${chrome[@]}" --dump-dom "file://$PWD/probe_page.html" > dom.html 2> chrome.err || { tail -5 chrome.err; fail "chromium"; }
timeout 120 "${chrome[@]}" --window-size=1400,2400 --screenshot="$PWD/shot.png" "file://$PWD/report.html" > /dev/null 2>> chrome.err \
  || { tail -5 chrome.err; fail "chromium screenshot"; }
"$PYTHON" - <<'PY'
import re
import numpy as np
from matplotlib import image
dom = open("dom.html").read()
checks = {
    "the title": "<h1>miniLST procurement report</h1>" in dom,
    "both tables": dom.count("<table>") == 2 and "Throughput, tokens/s per rank" in dom and "MFU in three conventions" in dom,
    "both plots decoded": re.search(r'data-images="decoded,decoded"', dom) is not None,
    "provenance": "<h2>Provenance</h2>" in dom and "machine files (name, kind, file, digest)" in dom,
}
shot = image.imread("shot.png")
colours = len(np.unique((shot[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0))
ink = float((shot[..., :3].mean(axis=2) < 0.9).mean())
checks[f"a screenshot with content ({colours} colours, {100 * ink:.1f}% ink)"] = colours > 50 and ink > 0.02
for k, v in checks.items():
    print(("ok   " if v else "FAIL ") + "HTML in Chromium: " + k)
if not all(checks.values()):
    raise SystemExit("the HTML does not show what it should")
PY
echo PASS
