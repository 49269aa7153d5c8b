#!/usr/bin/env bash
# The training step on a GPU against PyTorch on the same GPU: a deck run by a CUDA
# build of miniLST and the same step in PyTorch (analysis/peer/torch_step.py: same
# model, shapes and AdamW; bf16 autocast with fp32 master weights where the deck is
# bf16, scaled_dot_product_attention, fused AdamW, the LM head in as many
# mini-sequences as miniLST's), one process each, alternating for --rounds at each
# sequence length. Writes runs/bench/gpu_step_<UTC time>_.../ (or OUT=dir) with
# every metrics file, PyTorch's JSON, gpu_step_bench.h5 (per S and phase: seconds
# of both, ratio, MFU against miniLST's measured GEMM peak and the datasheet's) and
# gpu_step_bench.png (analysis/gpu_step_bench.py), and prints the ratio per S.
#   MINILST_BIN_DIR=build-cuda scripts/bench/gpu_step.sh [DECK] [--seq-lens 16384,65536]
#                         [--rounds 2] [--device cuda|cpu] [--set k=v ...]
# Default deck: inputs/llama3_8b_layer.yaml (one Llama-3-8B layer, bf16, S = 16384);
# default S: the deck's run.seq_len. --device cpu runs both on the CPU instead (the
# host build in build/ unless MINILST_BIN_DIR names another): the smoke test's mode.
# PyTorch runs in TORCH_PYTHON (default /usr/bin/python3), which needs torch (with
# CUDA for --device cuda), h5py and PyYAML; the analysis runs in /usr/bin/python3.
set -euo pipefail  # (common.sh, sourced below once the device is known, sets it too)

bad() { echo "gpu_step.sh: $*" >&2; exit 2; }  # a bad command line: the message, exit 2
deck="" seq_lens="" rounds=2 device=cuda extra=()
if [[ $# -gt 0 && $1 != --* ]]; then deck=$(realpath "$1"); shift; fi
while (($#)); do
  [[ $1 == --@(seq-lens|rounds|device|set) ]] || bad "unknown argument '$1'"
  (($# >= 2)) || bad "$1 needs a value"
  case $1 in
    --seq-lens) seq_lens=${2//,/ } ;;
    --rounds) rounds=$2 ;;
    --device) device=$2 ;;
    --set) extra+=(--set "$2") ;;
  esac
  shift 2
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || bad "--rounds '$rounds': a positive integer"
[[ $device == cuda || $device == cpu ]] || bad "--device '$device': cuda or cpu"
for S in $seq_lens; do [[ $S =~ ^[1-9][0-9]*$ ]] || bad "--seq-lens: '$S' is not a positive integer"; done
# Without a named build common.sh installs packages and builds the host build: not what a GPU run wants.
if [[ $device == cuda && -z ${MINILST:-}${MINILST_BIN_DIR:-} ]]; then
  bad "--device cuda needs a CUDA build of miniLST: set MINILST_BIN_DIR (for example build-cuda; docs/backends.md)"
fi
source "$(dirname "$0")/common.sh"
[[ -n $deck ]] || deck=$root/inputs/llama3_8b_layer.yaml
torch_py=${TORCH_PYTHON:-$py}
out=${OUT:-$(unique_dir "$root/runs/bench" gpu_step)}
mkdir -p "$out"

json_key() { "$py" -c "import json, sys; print(json.load(sys.stdin)[sys.argv[1]])" "$1"; }  # json_key KEY < JSON
# The deck as miniLST resolves it, alone and with the --set overrides (a bad deck is refused here,
# before any run): the deck's own S (its reference losses hold only there), the default S, and the
# precision, which names PyTorch's.
own=$("$minilst" plan "$deck" --format json)
resolved=$("$minilst" plan "$deck" "${extra[@]}" --format json)
deck_S=$(json_key seq_len <<< "$own")
[[ -n $seq_lens ]] || seq_lens=$(json_key seq_len <<< "$resolved")
precision=$(json_key precision <<< "$resolved")
case $precision in
  bf16) torch_precision=bf16 ;;
  float) torch_precision=fp32 ;;
  *) bad "run.precision '$precision' has no PyTorch peer here: use bf16 or float (--set run.precision=bf16)" ;;
esac
for S in $seq_lens; do
  ref=()  # another S is another problem: the deck's reference losses do not apply
  [[ $S == "$deck_S" ]] || ref=(--set reference.losses=)
  for r in $(seq 1 "$rounds"); do
    ml=$out/minilst_S${S}_r$r pt=$out/torch_S${S}_r$r
    echo "== S = $S, round $r: miniLST"
    "$minilst" run "$deck" "${extra[@]}" "${ref[@]}" --set run.seq_len="$S" --set output.metrics="$ml.h5" \
      > "$ml.log" 2>&1 || { tail -20 "$ml.log"; exit 1; }
    grep '^RESULT' "$ml.log"
    # What PyTorch must match: the steps, the LM head's mini-sequences; and where miniLST ran.
    info=$("$py" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r')
print(len(f['loss']), f.attrs['lm_head_chunks'], f.attrs['kokkos_execution_space'])" "$ml.h5")
    read -r steps chunks space <<< "$info"
    if [[ $device == cuda && $space != Cuda || $device == cpu && $space == Cuda ]]; then
      bad "$minilst runs on Kokkos' $space, not --device $device (MINILST_BIN_DIR names the build)"
    fi
    echo "== S = $S, round $r: PyTorch"
    "$torch_py" "$root/analysis/peer/torch_step.py" --config-from "$ml.h5" --steps "$steps" \
      --threads "$MINILST_THREADS" --device "$device" --precision "$torch_precision" --lm-head-chunks "$chunks" \
      --out "$pt.json" > "$pt.log" 2>&1 || { tail -20 "$pt.log"; exit 1; }
    tail -1 "$pt.log"
  done
done
"$py" "$root/analysis/gpu_step_bench.py" "$out"
