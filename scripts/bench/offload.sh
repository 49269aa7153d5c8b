#!/usr/bin/env bash
# Activation swapping benchmark (MEMO's Table 4 ablation at CPU scale): one deck
# with 8+ layers run with every memory policy, then the offload kinds again at a
# throttled bandwidth where alpha = 1 cannot hide behind a layer's compute but
# alpha = 0 can; then the longest sequence each of full and offload fits into a
# device budget (bisection on `minilst plan`), confirmed by a run. Writes
# runs/bench/offload_<UTC time>/ (one metrics file per run, offload_bench.h5 with
# the table, offload_bench.png) and prints the table.
#   scripts/bench/offload.sh [DECK] [--set section.key=value ...]
# Default deck: inputs/offload_cpu.yaml (about 10 minutes on one core). On a GPU
# node drop the throttled part (CUDA builds copy over the real link): THROTTLE=0.
# For CPU timings, let OpenBLAS pick its kernels for the machine, e.g.
#   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE scripts/bench/offload.sh
# MINILST=path/to/minilst skips the set-up and the build; OUT=dir names the output directory.
source "$(dirname "$0")/common.sh"

deck="$root/inputs/offload_cpu.yaml"
if [[ $# -gt 0 && $1 != --* ]]; then deck=$(realpath "$1"); shift; fi
extra=("$@")
out=${OUT:-$(unique_dir "$root/runs/bench" offload)}
mkdir -p "$out"

run() {  # run NAME --set ...: one run of the deck into NAME.h5 (log in NAME.log)
  local name=$1; shift
  printf '%-30s' "$name"
  if ! "$minilst" run "$deck" "${extra[@]}" "$@" --set output.metrics="$out/$name.h5" > "$out/$name.log" 2>&1; then
    echo "failed:"; tail -20 "$out/$name.log"; exit 1
  fi
  sed -n 's/^RESULT: \(.*\) metrics=.*/\1/p' "$out/$name.log"
}
attr() { "$py" -c "import h5py,sys; print(h5py.File(sys.argv[1],'r').attrs[sys.argv[2]])" "$1" "$2"; }

echo "== every policy, unthrottled ($deck)"
run full --set memory.policy=full
run checkpoint --set memory.policy=checkpoint
run checkpoint_offload --set memory.policy=checkpoint_offload
for a in 0 0.5 1 auto; do run "offload_$a" --set memory.policy=offload --set memory.offload_alpha=$a; done

# A link at which alpha = 1 cannot hide but alpha = 0 can: the bandwidth that
# moves x, o and half of the row tensors (q, k, v, y and the MLP's) in one layer's forward time.
if [[ ${THROTTLE:-1} != 0 ]]; then
  f="$out/offload_1.h5"
  gbs=$("$py" -c "x,o,r,t=[float(v) for v in '$(attr "$f" offload_layer_bytes_x) $(attr "$f" offload_layer_bytes_o) \
$(attr "$f" offload_layer_bytes_rest) $(attr "$f" offload_layer_forward_s)'.split()]; print(f'{(x+o+0.5*r)/t/1e9:.4f}')")
  echo "== throttled to $gbs GB/s (one layer's forward moves x, o and half of the row tensors)"
  run checkpoint_offload_throttled --set memory.policy=checkpoint_offload --set memory.offload_bandwidth_gbs="$gbs"
  for a in 0 0.5 1 auto; do
    run "offload_${a}_throttled" --set memory.policy=offload --set memory.offload_alpha=$a \
      --set memory.offload_bandwidth_gbs="$gbs"
  done
fi

# The longest sequence within full's device memory at the deck's length, per policy.
budget=$("$py" -c "import h5py; print(int(h5py.File('$out/full.h5','r')['memory/device_total'][0]) / 2**20)")
echo "== longest run.seq_len within $budget MiB of device memory (plan, then a 2-step run)"
for policy in full offload; do
  S=$("$minilst" plan "$deck" "${extra[@]}" --set memory.policy=$policy --device-mib "$budget" --max-seq-len \
      --format json | "$py" -c "import json,sys; print(json.load(sys.stdin)['seq_len'])")
  run "longest_$policy" --set memory.policy=$policy --set run.seq_len="$S" --set run.steps=2 --set run.warmup_steps=1 \
    --set reference.losses=  # another S: the deck's reference losses do not apply
done

"$py" "$root/analysis/offload_bench.py" "$out" --device-mib "$budget"
