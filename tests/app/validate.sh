#!/usr/bin/env bash
# minilst validate: the shipped table of published GPU runs is within its documented limits
# (exit 0), from the source tree and from any directory (the table beside the program); its
# JSON has the documented fields, every predicted figure within its table's limit and every
# other figure a reason; a published figure moved 30% puts its table beyond its limit (exit 1);
# a table with a key missing exits 2 naming it; --out writes a new file and never replaces
# one; the analysis plots the JSON.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
src="$MINILST_SOURCE"
(cd "$src" && "$MINILST" validate > "$tmp/text.txt") || { cat text.txt; echo "FAIL: the shipped table is beyond its limits"; exit 1; }
grep -q "every table within its limits" text.txt
"$MINILST" validate --format json --out out.json > stdout.json   # from a scratch directory: found beside the program
cmp <("$PYTHON" -m json.tool stdout.json) <("$PYTHON" -m json.tool out.json)
"$PYTHON" - stdout.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
limits = {t["table"]: t for t in d["tables"]}
bad, predicted = [], 0
for r in d["rows"]:
    for k in ("paper", "table", "kind", "published"):
        if k not in r: bad.append(f"{r.get('row')}: no {k}")
    if r["kind"] not in ("time", "throughput", "mfu"): bad.append(f"{r['row']}: kind {r['kind']}")
    if "error" in r:
        predicted += 1
        t = limits[r["table"]]
        if r["kind"] == "mfu":
            if abs(r["error_points"]) > t["mfu_limit_points"]: bad.append(f"{r['row']}: {r['error_points']}")
        elif abs(r["error"]) > t["limit"]: bad.append(f"{r['row']}: {r['error']:+.3f} beyond {t['limit']}")
        if not r["predicted"] > 0: bad.append(f"{r['row']}: predicted {r['predicted']}")
    elif not r.get("reason"): bad.append(f"{r['row']}: neither an error nor a reason")
names = {r["row"] for r in d["rows"] if "error" in r}
for must in ("+ Ulysses SP 8, 1.1M", "all five, 3.7M", "32 GPUs: ALST, 15M", "Llama3-8B MsT, bs 8"):
    if must not in names: bad.append(f"{must}: not predicted")
print(f"{len(d['rows'])} figures, {predicted} predicted, {len(d['tables'])} tables" if not bad else "FAIL " + "; ".join(bad))
sys.exit(1 if bad else 0)
PY
# a published figure moved by 30%: its table goes beyond its limit
mkdir -p v && cp -r "$src/validation/machines" "$src/validation/decks" v/ && mkdir -p inputs && cp "$src"/inputs/*.yaml inputs/
sed "s/value: 564$/value: 733/" "$src/validation/published.yaml" > v/published.yaml
grep -q "value: 733" v/published.yaml
set +e; "$MINILST" validate v/published.yaml --table alst_table1 > moved.txt; rc=$?; set -e
[[ $rc -eq 1 ]] && grep -q "BEYOND ITS LIMIT" moved.txt || { cat moved.txt; echo "FAIL: a moved figure passed (exit $rc)"; exit 1; }
# a missing key: exit 2, the key named
grep -v "^  machine: machines/alst" "$src/validation/published.yaml" > v/broken.yaml
set +e; "$MINILST" validate v/broken.yaml 2> broken.err; rc=$?; set -e
[[ $rc -eq 2 ]] && grep -q "tables\[0\].machine: missing" broken.err || { cat broken.err; echo "FAIL: exit $rc"; exit 1; }
# --out never replaces a file
echo keep > taken.json
set +e; "$MINILST" validate --out taken.json > /dev/null 2> taken.err; rc=$?; set -e
[[ $rc -eq 2 && "$(cat taken.json)" == keep ]] || { cat taken.err; echo "FAIL: --out replaced a file (exit $rc)"; exit 1; }
"$PYTHON" "$src/analysis/plot_validation.py" out.json --png plot.png
[[ -s plot.png ]]
echo "validate: ok"
