#!/usr/bin/env bash
# analysis/compare.py on two "machines": the same small sweep (inputs/tiny.yaml on
# 1 and 2 ranks, 2 repeats, scripts/slurm/sweep.sh --local) with 1 and with 2 BLAS
# threads per rank, which the metrics files record (blas_threads). Checks that
#  - the table puts both sources side by side, labelled by what tells them apart
#    (blas 1, blas 2), with spread and efficiency columns for each;
#  - the CSV has the expected columns and its numbers agree with the files: the
#    tokens/s median is the median of the runs' fom, speed-up = t(1)/t(2) of the
#    median step times, efficiency = speed-up x 1/2, the ratio between sources;
#  - the PNG is a PNG;
#  - one sweep passed twice under two labels (difference 0) warns of noise at
#    every point whose repeats spread;
#  - a sweep with a lost point counts it as failed;
#  - sweep.py finds point files by schema whatever their name (old sweeps:
#    metrics.h5) and hands several sweeps to compare.py; summarize.py names runs
#    by deck, layout, ranks and job, with host, layout, job and reportable rows.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON, MPIEXEC.
source "$(dirname "$0")/../app/common.sh"
analysis=$MINILST_SOURCE/analysis
deck=$MINILST_SOURCE/inputs/tiny.yaml
# unbound ranks: a rank bound to one core would run 1 BLAS thread whatever OPENBLAS_NUM_THREADS says
export MINILST LAUNCH="${MPIEXEC:-mpiexec} --oversubscribe --bind-to none -n" OMP_NUM_THREADS=1
export BUILD_DIR
BUILD_DIR=$(realpath --relative-to="$MINILST_SOURCE" "$(dirname "$MINILST")")

own_sweep() {  # own_sweep DIR: the layout sweep.sh writes (points.tsv, point_<i>/metrics.h5), run here
  local dir=$1 i=0 n r args kv sets
  mkdir -p "$dir"
  printf 'index\tranks\tseq_len\tstrategy\trepeat\tdeck\targs\n' > "$dir/points.tsv"
  for n in 1 2; do
    for r in 0 1; do
      args="run.seq_len=37 parallel.ulysses=$n parallel.ring=1 run.steps=4"
      printf '%d\t%d\t37\t%s\t%d\t%s\t%s\n' "$i" "$n" "$([[ $n == 1 ]] && echo local || echo ulysses)" "$r" "$deck" \
        "$args" >> "$dir/points.tsv"
      mkdir "$dir/point_$i"
      sets=()
      for kv in $args; do sets+=(--set "$kv"); done
      $LAUNCH "$n" "$MINILST" run "$deck" "${sets[@]}" --set output.metrics="$dir/point_$i/metrics.h5" \
        > "$dir/point_$i/minilst.log" 2>&1 || true
      i=$((i + 1))
    done
  done
}

sweep() {  # sweep NAME: tiny on 1 and 2 ranks (local, then Ulysses), 2 repeats; prints the sweep directory
  local out
  if out=$(RUNS_DIR=$tmp/$1 bash "$MINILST_SOURCE/scripts/slurm/sweep.sh" "$deck" --ranks 1,2 --strategies ulysses \
             --repeats 2 --set run.steps=4 --local 2> "$tmp/$1.err") &&
     [[ $(find "$(tail -1 <<< "$out")" -name '*.h5' | wc -l) == 4 ]]; then
    tail -1 <<< "$out"
  else  # sweep.sh is not usable here: the same points, run directly
    echo "sweep.sh did not make the sweep ($(tail -1 "$tmp/$1.err")): running its points directly" >&2
    rm -rf "${tmp:?}/$1" && own_sweep "$tmp/$1/sweep" && echo "$tmp/$1/sweep"
  fi
}

a=$(OPENBLAS_NUM_THREADS=1 sweep blas1)
b=$(OPENBLAS_NUM_THREADS=2 sweep blas2)
# One sweep as older versions wrote it (point_<i>/metrics.h5), one as the program names its files.
for f in "$a"/point_*/*.h5; do [[ $f == */metrics.h5 ]] || mv "$f" "$(dirname "$f")/metrics.h5"; done
for f in "$b"/point_*/metrics.h5; do [[ -f $f ]] && mv "$f" "$(dirname "$f")/tiny_ulysses_2r_20990101T000000Z_local_42.h5"; done

echo "== two machines"
"$PYTHON" "$analysis/compare.py" "$a" "$b" --csv two.csv --plot two.png | tee two.txt
"$PYTHON" - "$a" "$b" <<'PY'
import csv, glob, statistics, sys
import h5py

def fail(msg):
    sys.exit(f"FAIL: {msg}")

text = open("two.txt").read().splitlines()
rows = list(csv.DictReader(open("two.csv")))
sources = list(dict.fromkeys(r["source"] for r in rows))
if len(sources) != 2 or not ("blas 1" in sources[0] and "blas 2" in sources[1]):
    fail(f"expected two sources labelled by their BLAS threads, got {sources}")
# side by side: one header line names both sources, the next has spread and efficiency under each
head = next((i for i, l in enumerate(text) if sources[0] in l and sources[1] in l and "ref" in l), None)
if head is None:
    fail("no table header with both sources side by side")
names = text[head + 1].split()
for col in ("spread", "efficiency", "tok/s/rank"):
    if names.count(col) != 2:
        fail(f"column {col!r} appears {names.count(col)} times, not once per source: {names}")
if "noise?" not in names:
    fail("no noise? column")
want = {"deck", "layout", "ranks", "seq_len", "precision", "policy", "source", "runs", "failed",
        "tokens_per_s_per_rank_median", "tokens_per_s_per_rank_min", "tokens_per_s_per_rank_max",
        "tokens_per_s_per_rank_spread", "tokens_per_s_median", "step_s_median", "speedup", "efficiency",
        "ratio_to_reference", "noise", "mfu_median", "device_total_MiB", "comm_MiB_per_step_per_rank",
        "tokens_per_joule", "energy_source", "reportable", "step_s", "attention_s", "provenance"}
if want - set(rows[0]):
    fail(f"CSV lacks {sorted(want - set(rows[0]))}")

def runs(sweep, ranks):  # the files themselves, read without the analysis' reader
    out = []
    for path in glob.glob(f"{sweep}/point_*/*.h5"):
        with h5py.File(path, "r") as f:
            if f.attrs["schema"] == "minilst-metrics" and int(f.attrs["jobsize"]) == ranks:
                w = int(f.attrs["warmup_steps"])
                out.append((float(f.attrs["fom"]), float(f["timings/step"][w:].max(axis=1).mean())))
    return out

close = lambda x, y: abs(x - y) <= 1e-9 * max(abs(x), abs(y), 1e-30)
by = {(r["source"], int(r["ranks"])): r for r in rows}
for src, sweep in zip(sources, sys.argv[1:3]):
    for n in (1, 2):
        r, got = by[(src, n)], runs(sweep, n)
        if int(r["runs"]) != 2 or len(got) != 2:
            fail(f"{src} {n} ranks: {r['runs']} runs in the CSV, {len(got)} files")
        med = statistics.median(g[0] for g in got)
        if not close(float(r["tokens_per_s_per_rank_median"]), med):
            fail(f"{src} {n} ranks: tokens/s median {r['tokens_per_s_per_rank_median']} != median of fom {med}")
        if not close(float(r["tokens_per_s_median"]), med * n):
            fail(f"{src} {n} ranks: total tokens/s {r['tokens_per_s_median']} != {n} x {med}")
        if not close(float(r["step_s_median"]), statistics.median(g[1] for g in got)):
            fail(f"{src} {n} ranks: step time median disagrees with the files")
    one, two = by[(src, 1)], by[(src, 2)]
    speedup = float(one["step_s_median"]) / float(two["step_s_median"])
    if not (float(one["efficiency"]) == 1.0 and two["scaling"] == "strong" and int(two["base_ranks"]) == 1
            and close(float(two["speedup"]), speedup) and close(float(two["efficiency"]), speedup / 2)):
        fail(f"{src}: speed-up {two['speedup']} / efficiency {two['efficiency']} != t(1)/t(2) = {speedup} and half")
for n in (1, 2):
    ratio = float(by[(sources[1], n)]["tokens_per_s_per_rank_median"]) / float(by[(sources[0], n)]["tokens_per_s_per_rank_median"])
    if not close(float(by[(sources[1], n)]["ratio_to_reference"]), ratio):
        fail(f"{n} ranks: ratio_to_reference != {ratio}")
if open("two.png", "rb").read(8) != b"\x89PNG\r\n\x1a\n":
    fail("two.png is not a PNG")
print("two machines: ok")
PY

echo "== one sweep twice: the difference is 0, so any spread is noise"
"$PYTHON" "$analysis/compare.py" A="$a" B="$a" --csv same.csv --markdown | tee same.txt
grep -q "^| deck | layout |" same.txt || { echo "FAIL: --markdown printed no Markdown table"; exit 1; }
"$PYTHON" - <<'PY'
import csv, sys
rows = list(csv.DictReader(open("same.csv")))
text = open("same.txt").read()
spread = [r for r in rows if float(r["tokens_per_s_per_rank_max"]) > float(r["tokens_per_s_per_rank_min"])]
bad = [r for r in spread if r["noise"] != "yes"]
if not spread or bad or any(float(r["ratio_to_reference"]) != 1.0 for r in rows):
    sys.exit(f"FAIL: identical sources: {len(spread)} spread rows, noise missing in {len(bad)}")
if "WARNING: noise" not in text:
    sys.exit("FAIL: no noise summary line")
print(f"identical sources: noise? = yes at {len(spread)} of {len(rows)} rows: ok")
PY

echo "== a lost point is a failed run"
cp -r "$a" lost && rm lost/point_3/*.h5
"$PYTHON" "$analysis/compare.py" lost | tee lost.txt
grep -Eq "ulysses +2 .* 1 \+1 failed" lost.txt || { echo "FAIL: the lost point is not counted as failed"; exit 1; }
grep -q "point 3: no metrics file" lost.txt || { echo "FAIL: the lost point is not named"; exit 1; }

echo "== sweep.py: old and new file names, several sweeps"
"$PYTHON" "$analysis/sweep.py" "$b" --plot b.png | tee b.txt
grep -Eq "^ +2 +37 ulysses +2 +0 .* (\?|yes|no) " b.txt || { echo "FAIL: sweep.py did not find the renamed files"; exit 1; }
grep -q "reportable" b.txt && test -s b.png
"$PYTHON" "$analysis/sweep.py" "$a" "$b" > both.txt 2> both.err
grep -q "compare.py" both.err && grep -q "blas 2" both.txt || { echo "FAIL: sweep.py did not hand two sweeps on"; exit 1; }

echo "== summarize.py names runs by what they are"
"$PYTHON" "$analysis/summarize.py" "$a/point_0/metrics.h5" "$a/point_2/metrics.h5" > sum.txt
grep -E "^run +tiny local 1r S=37 job local +tiny ulysses 2r S=37 job local" sum.txt &&
  grep -Eq "^host " sum.txt && grep -Eq "^layout +local +ulysses" sum.txt && grep -Eq "^job " sum.txt &&
  grep -Eq "^reportable " sum.txt || { echo "FAIL: summarize.py's comparison"; cat sum.txt; exit 1; }
echo "compare two machines: ok"
