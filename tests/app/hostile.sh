#!/usr/bin/env bash
# What a hostile user found in the commands added after `run` (docs/tests.md), each now refused or
# survived: probe never replaces a file that is not an earlier machine file (a finished metrics file,
# a deck), checks its output and its memory before measuring, and stops on SIGTERM writing nothing;
# verify stops on SIGINT; a FIFO, a device or a directory where miniLST reads a machine file, a deck
# or a lock is refused at once (no hang), as is a lock naming a pid no process can have; run.documents
# and model.sliding_window_layers take the deck's number rules and cannot cut a sequence into more than
# 2^24 documents; machine files are held to physics (a rate above the file's own peak, a subnormal, a
# rank count beyond 2^20, an odd head dim, duplicate keys, two documents); plan's JSON is JSON for a
# machine name with quotes, a newline and bad UTF-8; the environment is checked (OMP_NUM_THREADS,
# KOKKOS_TOOLS_LIBS, SLURM_JOB_END_TIME); --link-floor-gbs 0 says what it expects; too deep a deck is
# named as such; the analysis reads protected and never writes through a link or into a FIFO.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON, MPIEXEC.
source "$(dirname "$0")/common.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
tiny=$MINILST_SOURCE/inputs/tiny.yaml
h100=$MINILST_SOURCE/machines/h100-sxm-8gpu-ib400.yaml
fail() { echo "FAIL: $*"; exit 1; }
refused() {  # refused WHAT TEXT COMMAND...: exit 2 within 20 s, stderr naming TEXT
  local what=$1 text=$2 rc=0
  shift 2
  timeout -k 5 20 "$@" > out.txt 2> err.txt || rc=$?
  [[ $rc -eq 2 ]] || fail "$what: exit $rc (expected 2): $(tail -2 err.txt)"
  grep -qF -- "$text" err.txt || fail "$what: the message does not name '$text': $(tail -2 err.txt)"
  echo "refused: $what: $(grep -m1 error err.txt | cut -c1-150)"
}

"$MINILST" run "$tiny" --set run.steps=3 --set output.metrics=done.h5 > /dev/null
cp done.h5 done.bak && cp "$tiny" deck.yaml && cp deck.yaml deck.bak

# probe --out: never over a metrics file or a deck; checked before measuring (no time spent)
refused "probe over a finished metrics file" "done.h5" "$MINILST" probe --out done.h5 --size 16 --repeats 1
refused "probe over a deck" "deck.yaml" "$MINILST" probe --out deck.yaml --size 16 --repeats 1
cmp done.h5 done.bak && cmp deck.yaml deck.bak || fail "probe changed a user's file"
mkfifo out.fifo
refused "probe into a FIFO" "out.fifo" "$MINILST" probe --out out.fifo --size 16 --repeats 1
refused "probe --size 16384 beyond memory" "--size" "$MINILST" probe --out big.yaml --size 16384
refused "probe --comm-mib 1e9" "--comm-mib" "$MINILST" probe --out big.yaml --comm-mib 1e9
refused "probe --link-floor-gbs 0" "expected a positive number of GB/s" "$MINILST" probe --out x.yaml --link-floor-gbs 0
! grep -q "[0-9]\{30\}" err.txt || fail "--link-floor-gbs 0: a 300-digit number in the message"
[[ ! -e big.yaml && ! -e x.yaml ]] || fail "a refused probe wrote a file"
# an earlier machine file of the probe's may be replaced
cp "$h100" old_probe.yaml
"$MINILST" probe --out old_probe.yaml --size 64 --repeats 1 --comm-mib 0.25 --allow-implausible > /dev/null || fail "probe over its own kind"
grep -q "kind: measured" old_probe.yaml || fail "probe did not replace its earlier machine file"

# probe and verify stop on a signal within seconds, writing nothing partial
"$MINILST" probe --out term.yaml > probe_term.log 2>&1 &
pid=$!
sleep 2
kill -TERM $pid
start=$SECONDS
rc=0
wait $pid || rc=$?
((rc == 4 && SECONDS - start <= 5)) || fail "probe after SIGTERM: exit $rc after $((SECONDS - start)) s"
[[ ! -e term.yaml ]] && ! compgen -G "term.yaml*" > /dev/null || fail "a stopped probe left a file"
grep -q "stopped by SIGTERM" probe_term.log || fail "probe: no word of the signal"
"$MINILST" verify "$tiny" --set run.seq_len=2048 --set output.metrics=vv.h5 > verify_int.log 2>&1 &
pid=$!
sleep 1
kill -INT $pid
rc=0
wait $pid || rc=$?
((rc == 4)) || fail "verify after SIGINT: exit $rc"
! compgen -G "vv*.partial" > /dev/null || fail "a stopped verify left a partial file"
echo "probe and verify stop on SIGTERM / SIGINT (exit 4), nothing partial"

# inputs that are not regular files: refused at once, never waited on
mkfifo m.yaml d.yaml m.h5.lock
refused "a FIFO as the machine file" "m.yaml" "$MINILST" plan "$tiny" --machine m.yaml
refused "a FIFO as the deck" "d.yaml" "$MINILST" plan d.yaml
refused "a FIFO as the lock" "m.h5.lock" "$MINILST" run "$tiny" --set output.metrics=m.h5
ln -s /dev/zero z.h5.lock
refused "a lock linked to /dev/zero" "z.h5.lock" "$MINILST" run "$tiny" --set output.metrics=z.h5
mkdir dir.h5.lock
refused "a directory as the lock" "a directory" "$MINILST" run "$tiny" --set output.metrics=dir.h5
printf 'minilst-lock host=%s pid=99999999999 pid_start=1 started=x token=y\n' "$(hostname)" > pid.h5.lock
refused "a lock naming an impossible pid" "names no miniLST run" "$MINILST" run "$tiny" --set output.metrics=pid.h5

# the deck's text keys that hold numbers take the deck's number rules; no runaway document list
for d in "fixed:1e300" "9.3e18" "uniform:1e300:1e300" " " "+3" "0x10" "fixed:3:"; do
  refused "run.documents='$d'" "run.documents" "$MINILST" plan "$tiny" --set "run.documents=$d"
done
refused "one document per token of 2^30" "2^24 documents" "$MINILST" plan "$tiny" --set run.seq_len=1073741824 --set run.documents=fixed:1
for w in "0x1" "-0" "1.0" "every:2.0"; do
  refused "sliding_window_layers='$w'" "sliding_window_layers" "$MINILST" plan "$tiny" --set model.sliding_window=4 --set "model.sliding_window_layers=$w"
done
refused "sliding_window = 2^53 + 1" "9007199254740992" "$MINILST" plan "$tiny" --set model.sliding_window=9007199254740993
refused "rope_theta = 1e-320" "too small to compute with" "$MINILST" plan "$tiny" --set model.rope_theta=1e-320
"$PYTHON" -c "print('model: ' + '[' * 5000 + ']' * 5000)" > deep.yaml
refused "a deck nested 5000 deep" "nested more than 64 levels" "$MINILST" plan deep.yaml

# machine files held to physics
bad() {  # bad NAME TEXT SED-EXPRESSION | -- APPENDED: the file refused, naming TEXT
  local name=$1 text=$2
  if [[ $3 == -- ]]; then { cat "$h100"; printf '%b' "$4"; } > "$name.yaml"; else sed "$3" "$h100" > "$name.yaml"; fi
  refused "machine file: $name" "$text" "$MINILST" plan "$tiny" --machine "$name.yaml"
}
bad rate_1e300 "beyond any machine" 's/square: 742000/square: 1e300/'
bad above_peak "above the file's own nominal.gemm_gflops" 's/bf16: {square: 742000/bf16: {square: 989000000/'
bad subnormal "subnormal" 's/square: 742000/square: 1e-310/'
bad ranks "ranks_per_node" 's/ranks_per_node: 8/ranks_per_node: 10000000000/'
bad twice "given twice" -- 'ranks_per_node: 8\n'
bad two_docs "2 YAML documents" -- '---\nname: x\n'
bad odd_head_dim "attention_probe.head_dim" -- 'attention_probe:\n  heads_per_kv: 2\n  head_dim: 3\n'

# plan's JSON is JSON whatever the machine's name holds
{ sed '/^name:/d' "$h100"; printf 'name: "a \\"quoted\\"\\nname \\x01 \\xff"\n'; } > named.yaml
"$MINILST" plan "$tiny" --machine named.yaml --format json > named.json || fail "plan --machine named.yaml"
"$PYTHON" -c "import json,sys; d=json.load(open('named.json')); assert 'quoted' in d['machine']['name'], d['machine']" ||
  fail "plan's JSON with an odd machine name"
echo "plan --format json: a name with quotes, a newline and bad UTF-8 is escaped"

# the environment the libraries read at start-up
refused "OMP_NUM_THREADS=100000" "OMP_NUM_THREADS" env OMP_NUM_THREADS=100000 "$MINILST" plan "$tiny"
refused "KOKKOS_TOOLS_LIBS=/etc/passwd" "KOKKOS_TOOLS_LIBS" env KOKKOS_TOOLS_LIBS=/etc/passwd "$MINILST" plan "$tiny"
refused "SLURM_JOB_END_TIME=garbage" "SLURM_JOB_END_TIME" env SLURM_JOB_END_TIME=garbage "$MINILST" plan "$tiny"

# the analysis: protected reads, no write through a link or into a FIFO, a file missing comm bytes compared
mkfifo pipe.h5
timeout -k 5 20 "$PYTHON" "$MINILST_SOURCE/analysis/predicted_vs_measured.py" pipe.h5 > /dev/null 2> pvm.err && fail "a FIFO read"
grep -q "not a regular file" pvm.err || fail "predicted_vs_measured.py on a FIFO: $(cat pvm.err)"
echo garbage > garbage.h5
rc=0
"$PYTHON" "$MINILST_SOURCE/analysis/predicted_vs_measured.py" garbage.h5 > /dev/null 2> pvm.err || rc=$?
[[ $rc -eq 1 ]] && ! grep -q Traceback pvm.err || fail "predicted_vs_measured.py on garbage: exit $rc $(cat pvm.err)"
ln -s deck.yaml link.csv
"$PYTHON" "$MINILST_SOURCE/analysis/summarize.py" done.h5 --csv link.csv > /dev/null 2>&1 && fail "a CSV written through a link"
cmp deck.yaml deck.bak || fail "summarize.py wrote through a link"
"$PYTHON" - <<'PY'
import h5py, shutil
shutil.copy("done.h5", "nocomm.h5")
with h5py.File("nocomm.h5", "a") as f:
    for op in list(f["comm"].keys()):
        if "bytes" in f["comm"][op]:
            del f["comm"][op]["bytes"]
PY
"$PYTHON" "$MINILST_SOURCE/analysis/compare.py" done.h5 nocomm.h5 > compare.log 2>&1 || fail "compare.py on a file without comm bytes: $(tail -3 compare.log)"
echo "analysis: FIFO and garbage refused in one line, no write through a link, a file without comm bytes compared"
echo "hostile: ok"
