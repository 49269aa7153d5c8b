#!/usr/bin/env bash
# Bad input must fail fast: a message naming the key or constraint, exit code 2,
# and no metrics or dump file left behind. Also under 2 MPI ranks: every rank
# exits non-zero and nothing hangs.
# Environment (set by ctest): MINILST, MINILST_SOURCE, MPIEXEC.
set -uo pipefail
: "${MINILST:?}" "${MINILST_SOURCE:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
deck="$MINILST_SOURCE/inputs/tiny.yaml"
failures=0

# expect REGEX CMD...: CMD exits with 2, prints REGEX, writes no .h5 file.
expect() {
  local regex=$1; shift
  rm -f ./*.h5 ./*.partial
  local out rc
  out=$(timeout 120 "$@" 2>&1); rc=$?
  local files; files=$(ls ./*.h5 ./*.partial 2>/dev/null)
  if [[ $rc -ne 2 ]] || ! grep -Eq -- "$regex" <<<"$out" || [[ -n $files ]]; then
    echo "FAIL: $* -> exit $rc, files [$files], output:"; echo "$out" | sed 's/^/    /'
    failures=$((failures + 1))
  else
    echo "ok:   $(grep -E -m1 -- "$regex" <<<"$out")"
  fi
}
run() { expect "$1" "$MINILST" run "${@:2}"; }
set_() { local regex=$1; shift; local args=(); for kv in "$@"; do args+=(--set "$kv"); done
         run "$regex" "$deck" --set output.metrics=m.h5 --set output.dump=d.h5 "${args[@]}"; }

set_ "unknown key 'model.hiden'.*keys of 'model': hidden, layers"      model.hiden=8
set_ "model.hidden \(40\) is not divisible by model.heads \(6\)"      model.heads=6
set_ "model.heads \(4\) is not divisible by model.kv_heads \(3\)"    model.kv_heads=3
set_ "run.seq_len = '1': must be in \[2, "                              run.seq_len=1
set_ "model.hidden = '-8': must be in \[1, 1048576\]"                   model.hidden=-8
set_ "model.layers = '-1': must be in \[1, "                             model.layers=-1
set_ "model.vocab = '0': must be in \[2, "                               model.vocab=0
set_ "model.hidden = '4294967336': must be in \[1, 1048576\]"           model.hidden=4294967336
set_ "run.grad_accum = '2147483648': must be in \[1, 4096\]"            run.grad_accum=2147483648
set_ "model.hidden = ' 40': expected an integer"                         "model.hidden= 40"
set_ "model.hidden = '40 ': expected an integer"                         "model.hidden=40 "
set_ "mst.chunk_budget_mib = '2e302': must be in"                        mst.chunk_budget_mib=2e302
set_ "the run needs .* MiB of .*per rank \(memory model\) but .* MiB are available" run.seq_len=1000000000000
set_ "output.metrics: '/dev/full' exists and is not a regular file"      output.metrics=/dev/full
set_ "output.metrics: '/tmp' exists and is not a regular file \(a directory\)" output.metrics=/tmp
set_ "output.metrics: cannot create a file beside '/proc/m.h5'"          output.metrics=/proc/m.h5
set_ "output.metrics '.*tiny.yaml' is the deck itself"                   "output.metrics=$deck"
set_ "output.dump and output.metrics name the same file"                 output.metrics=x.h5 output.dump=./x.h5
[[ -c /dev/full ]] || { echo "FAIL: /dev/full is no longer a device"; failures=$((failures + 1)); }
expect "--kokkos-bogus=1: unknown Kokkos flag" "$MINILST" run "$deck" --kokkos-bogus=1
run  "'$tmp' is a directory, not a deck file"                           "$tmp"
for bad in "$MINILST_SOURCE"/tests/fuzz/corpus/*.yaml; do  # decks that once crashed, hung or passed silently
  run "error: deck: " "$bad"
done
set_ "model.layers = '2.5': expected an integer"                       model.layers=2.5
set_ "run.precision = 'half': allowed values: float\|double\|bf16"     run.precision=half
set_ "memory.policy = 'swap': allowed values: full\|checkpoint\|hf_checkpoint\|checkpoint_offload\|offload\|vanilla" memory.policy=swap
set_ "memory.offload_alpha = '1.5': must be in \[0, 1\]"               memory.offload_alpha=1.5
set_ "run.attention_kernel = 'flash': allowed values: auto\|portable\|tensor_core" run.attention_kernel=flash
set_ "run.attention_kernel: tensor_core: the tensor-core kernels "      run.attention_kernel=tensor_core run.precision=double
set_ "memory.offload_alpha = '-0.1': must be in \[0, 1\]"              memory.offload_alpha=-0.1
set_ "parallel.zero = '4': must be in \[0, 3\]"                         parallel.zero=4
set_ "memory.optimizer_offload = 'yes': allowed values: true\|false"    memory.optimizer_offload=yes
set_ "parallel.zero = 3 on 1 rank: there is nothing to shard"            parallel.zero=3
set_ "parallel.zero = 1 on 1 rank"                                       parallel.zero=1 memory.optimizer_offload=true
set_ "memory.optimizer_offload keeps .* MiB of optimizer states per rank in host memory, more than memory.host_budget_mib = 0.01" \
     parallel.zero=2 memory.optimizer_offload=true memory.host_budget_mib=0.01
set_ "memory.offload_alpha = 'half': expected a finite number or 'auto'" memory.offload_alpha=half
set_ "memory.offload_bandwidth_gbs = '-2': must be in \[0, "            memory.offload_bandwidth_gbs=-2
set_ "memory.host_budget_mib = '0': must be in \(0, "                   memory.host_budget_mib=0
set_ "memory.policy offload needs 0.06 MiB of host memory per rank even at memory.offload_alpha = 0, but memory.host_budget_mib allows 0.00 MiB" \
     memory.policy=offload model.layers=4 memory.host_budget_mib=0.001
set_ "memory.offload_alpha = 1 needs .* MiB of host memory per rank, but memory.host_budget_mib allows .* \(the largest alpha that fits: 0\.[0-9]+\)" \
     memory.policy=offload model.layers=4 run.seq_len=2000 memory.offload_alpha=1 memory.host_budget_mib=5
set_ "run.learning_rate = 'fast': expected a finite number"            run.learning_rate=fast
set_ "run.warmup_steps \(2\) must be < run.steps \(2\)"                run.warmup_steps=2
set_ "head dim model.hidden/model.heads = 5 must be even"               model.hidden=40 model.heads=8 model.kv_heads=8
set_ "model.heads \(4\) is not divisible by the Ulysses degree parallel.ulysses \(3\)"  parallel.ulysses=3
set_ "model.kv_heads \(3\) and parallel.ulysses \(2\): the kv heads must be a multiple" \
     model.hidden=48 model.heads=6 model.kv_heads=3 parallel.ulysses=2
set_ "unknown key 'parallel.degree'"                                   parallel.degree=2
set_ "parallel.ring_variant = 'fast': allowed values: flash\|rsa"      parallel.ring_variant=fast
set_ "parallel.rsa_backward = 'autograd': allowed values: seed\|flash" parallel.rsa_backward=autograd
set_ "unknown section 'modle'"                                          modle.hidden=8
set_ "--set 'nodot': expected section.key=value"                        nodot
run  "file '.*/missing.yaml' not found"                                 "$tmp/missing.yaml"
printf 'model:\n  hidden: [1, 2\n' > broken.yaml
run  "is not valid YAML"                                                broken.yaml
printf 'model:\n  hidden: 64\n  heads: 4\n  dropout: 0.1\n' > extra.yaml
run  "unknown key 'model.dropout'"                                      extra.yaml
expect "run: DECK is required|deck is required"                         "$MINILST" run

# nothing silently accepted: empty decks and sections, meaningless values, Kokkos flags, plan budgets
printf '{}\n' > empty_map.yaml
run  "'empty_map.yaml' sets no key"                                     empty_map.yaml
printf 'model:\nrun:\n' > empty_sections.yaml
run  "section 'model' is empty"                                         empty_sections.yaml
set_ "model.norm_eps = '1e300': must be in \[0, 0.1\]"                  model.norm_eps=1e300
set_ "memory.offload_bandwidth_gbs = 1.0e-300: a cap below 0.001 GB/s"  memory.offload_bandwidth_gbs=1e-300
expect "--kokkos-num-threads expects an integer >= 1" "$MINILST" run "$deck" --kokkos-num-threads=abc
expect "the tools library '/nonexistent.so' is not a file" "$MINILST" run "$deck" --kokkos-tools-libs=/nonexistent.so
expect "--kokkos-threads: needs a value" "$MINILST" run "$deck" --kokkos-threads
expect "--device-mib: expected a number of MiB in \(0, 2\^40\]" "$MINILST" plan "$deck" --max-seq-len --device-mib nan
# outputs: refused before step 1, and nothing of the user's touched
set_ "output.metrics: 'out/' names a directory: give a file name"      output.metrics=out/
mkdir user && echo "a user's notes" > user/notes.txt && ln -s notes.txt user/link.h5 && ln -s notes.txt user/p.h5.partial
run  "output.metrics: 'user/notes.txt' exists and is not a miniLST output of this kind" "$deck" --set output.metrics=user/notes.txt
run  "output.metrics: 'user/link.h5' is a symbolic link"               "$deck" --set output.metrics=user/link.h5
run  "output.metrics: 'user/p.h5.partial' is a symbolic link"          "$deck" --set output.metrics=user/p.h5
run  "output.dump: 'user/notes.txt' exists and is not a miniLST output" "$deck" --set output.dump=user/notes.txt
set_ "one is the other's temporary name"                                output.metrics=x.h5 output.dump=x.h5.partial
set_ "output.dump 'x.json' is output.metrics' JSON summary 'x.json'"     output.metrics=x.h5 output.dump=x.json
echo '{"a user": "file"}' > user/run.json && cp "$deck" user/deck.json
run  "output.metrics: its JSON summary 'user/run.json' exists and is not a miniLST summary" "$deck" --set output.metrics=user/run.h5
run  "its JSON summary 'user/deck.json' would replace the deck itself" user/deck.json --set output.metrics=user/deck.h5
[[ $(cat user/run.json) == '{"a user": "file"}' ]] && cmp -s "$deck" user/deck.json \
  || { echo "FAIL: a JSON file of the user's was changed"; failures=$((failures + 1)); }
[[ $(cat user/notes.txt) == "a user's notes" && -L user/link.h5 && -L user/p.h5.partial && ! -e user/p.h5 ]] \
  || { echo "FAIL: a file of the user's was changed"; failures=$((failures + 1)); }

if [[ -n ${MPIEXEC:-} ]]; then  # every rank exits non-zero, no hang
  # command lines that differ between ranks: refused on every rank before anything else
  expect "the command line differs between ranks \(argument 5 is nothing on rank 0 and '--bogus' on rank 1\)" \
    "$MPIEXEC" -n 1 "$MINILST" run "$deck" --set output.metrics=m.h5 : -n 1 "$MINILST" run "$deck" --set output.metrics=m.h5 --bogus
  expect "the command line differs between ranks \(argument 1 is 'run' on rank 0 and 'plan' on rank 1\)" \
    "$MPIEXEC" -n 1 "$MINILST" run "$deck" : -n 1 "$MINILST" plan "$deck"
  expect "model.heads \(4\) is not divisible by model.kv_heads \(3\)" \
    "$MPIEXEC" -n 2 --oversubscribe "$MINILST" run "$deck" --set model.kv_heads=3 --set output.metrics=m.h5
  expect "the world size \(3 ranks\) is not a multiple of parallel.ulysses x parallel.ring \(1 x 2 = 2\)" \
    "$MPIEXEC" -n 3 --oversubscribe "$MINILST" run "$deck" --set parallel.ring=2 --set output.metrics=m.h5
  # a deck that differs between ranks, or is missing on one: refused on every rank before any collective
  # the same command line, but a deck that differs between ranks (r0/, r1/), or is missing on one
  mkdir -p r0 r1 && sed 's/^run:/run:\n  seed: 3/' "$deck" > r0/d.yaml && sed 's/^run:/run:\n  seed: 4/' "$deck" > r1/d.yaml
  grep -q "seed: 3" r0/d.yaml || { echo "FAIL: tiny.yaml has no run.seed to vary"; failures=$((failures + 1)); }
  expect "the deck differs between ranks \(run.seed = 3 on rank 0, 4 on rank 1\)" \
    "$MPIEXEC" -n 2 --oversubscribe bash -c "cd r\$OMPI_COMM_WORLD_RANK && exec '$MINILST' run d.yaml --set output.metrics=$tmp/m.h5"
  rm r1/d.yaml
  expect "the deck could not be used on rank\(s\) 1 of 2" \
    "$MPIEXEC" -n 2 --oversubscribe bash -c "cd r\$OMPI_COMM_WORLD_RANK && exec '$MINILST' run d.yaml --set output.metrics=$tmp/m.h5"
  # the JSON summary's name: a user's JSON (a schema of another type too) and a link at its temporary name
  echo '{"schema": 1}' > user/typed.json && ln -s notes.txt user/linked.json.partial
  expect "its JSON summary 'user/run.json' exists and is not a miniLST summary" \
    "$MPIEXEC" -n 2 --oversubscribe "$MINILST" run "$deck" --set parallel.ring=2 --set output.metrics=user/run.h5
  expect "its JSON summary 'user/typed.json' exists and is not a miniLST summary" \
    "$MPIEXEC" -n 2 --oversubscribe "$MINILST" run "$deck" --set output.metrics=user/typed.h5
  expect "its JSON summary: 'user/linked.json.partial' is a symbolic link" \
    "$MPIEXEC" -n 2 --oversubscribe "$MINILST" run "$deck" --set output.metrics=user/linked.h5 --set output.overwrite=true
  [[ $(cat user/typed.json) == '{"schema": 1}' && $(cat user/notes.txt) == "a user's notes" && ! -e user/linked.h5 ]] \
    || { echo "FAIL: a JSON file of the user's was changed"; failures=$((failures + 1)); }
fi

echo "bad decks: $failures failure(s)"
exit $((failures > 0))
