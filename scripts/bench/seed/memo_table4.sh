#!/usr/bin/env bash
# MEMO (arXiv 2407.12117) Table 4: the ablation of its token-wise activation
# management: full swapping (every skeletal activation to host memory), full
# recomputation (only each layer's input and attention output swapped, the rest
# recomputed) and MEMO's mix (a fraction alpha of the tokens swapped, the rest
# recomputed), by MFU.
#   CPU scale: one rank of inputs/offload_cpu.yaml (8 layers, d = 384) at S = 2048,
#   float, 4 steps (the first a warm-up): a first run measures a layer's forward
#   time and the bytes it swaps, then the copy engine is capped at the bandwidth
#   that moves x, o and half of the rest in one layer's forward (a link too slow to
#   swap everything, as PCIe is for MEMO at moderate S), and memory.policy offload
#   runs at alpha = 0 (full recomputation), 1 (full swap) and auto (MEMO); full and
#   checkpoint (Megatron-style whole-layer recomputation) for reference. MFU,
#   step time, the offload wait and recompute, memory against the prediction.
#   About a minute. --tiny: inputs/tiny.yaml with 4 layers, 2 steps.
#   Paper scale: inputs/llama2_7b.yaml (MEMO's 7B size) on 8 ranks (Ulysses 8) at
#   S = 1M, bf16, predicted device and host memory per rank of each row.
#   scripts/bench/seed/memo_table4.sh [--tiny]
source "$(dirname "$0")/lib.sh"

deck="$root/inputs/offload_cpu.yaml"
base=(--set run.seq_len=2048 --set run.steps=4 --set run.warmup_steps=1)
if ((tiny)); then
  deck="$root/inputs/tiny.yaml"
  base=(--set model.layers=4 --set run.seq_len=48 --set run.steps=2 --set run.warmup_steps=1)
fi
run_row cal 1 "calibration: full swap, unthrottled" "$deck" "${base[@]}" --set memory.policy=offload \
  --set memory.offload_alpha=1 --set run.steps=2
gbs=$(half_swap_gbs "$out/cal.h5")
echo "$gbs" > "$out/cap_gbs.txt"
echo "copy engine capped at $gbs GB/s: one layer's forward time moves x, o and half of the rest"
cap=(--set memory.offload_bandwidth_gbs="$gbs")
run_row full 1 "full (nothing swapped or recomputed)" "$deck" "${base[@]}" --set memory.policy=full
run_row checkpoint 1 "checkpoint (whole-layer recomputation)" "$deck" "${base[@]}" --set memory.policy=checkpoint
run_row recompute 1 "full recomputation (alpha = 0)" "$deck" "${base[@]}" "${cap[@]}" --set memory.policy=offload \
  --set memory.offload_alpha=0
run_row swap 1 "full swap (alpha = 1)" "$deck" "${base[@]}" "${cap[@]}" --set memory.policy=offload \
  --set memory.offload_alpha=1
run_row memo 1 "MEMO (alpha auto)" "$deck" "${base[@]}" "${cap[@]}" --set memory.policy=offload \
  --set memory.offload_alpha=auto

# Paper scale: a 7B model, 8 ranks, S = 1M (MEMO's headline run), predicted.
big=(--set run.seq_len=1048576 --set parallel.ulysses=8)
plan_row gpu_checkpoint 8 "checkpoint (whole-layer recomputation)" "$root/inputs/llama2_7b.yaml" "${big[@]}" \
  --set memory.policy=checkpoint
plan_row gpu_recompute 8 "full recomputation (alpha = 0)" "$root/inputs/llama2_7b.yaml" "${big[@]}" \
  --set memory.policy=offload --set memory.offload_alpha=0
plan_row gpu_swap 8 "full swap (alpha = 1)" "$root/inputs/llama2_7b.yaml" "${big[@]}" \
  --set memory.policy=offload --set memory.offload_alpha=1

analyse
