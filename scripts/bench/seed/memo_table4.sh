#!/usr/bin/env bash
# MEMO (arXiv 2407.12117) Table 4: the ablation of its memory plan and of its
# token-wise activation management, by MFU, 7B on 8 GPUs (TP 4, CP 2): full
# recomputation without and with the memory plan, full swapping (every skeletal
# activation to host memory) and MEMO's mix (a fraction alpha of the tokens
# swapped, the rest recomputed), at S = 64K to 896K.
#   CPU scale: one rank of inputs/offload_cpu.yaml (8 layers, d = 384) at S = 2048,
#   float, 4 steps (the first a warm-up): a first run measures a layer's forward
#   time and the bytes it swaps, then the copy engine is capped at the bandwidth
#   that moves x, o and half of the rest in one layer's forward (a link too slow to
#   swap everything, as MEMO's is at 64K), and memory.policy offload runs at
#   alpha = 0 without the memory plan (memory.planner none) and with it, at alpha =
#   1 and at auto (MEMO); full and checkpoint (Megatron-style whole-layer
#   recomputation) for reference. MFU, step time, the offload wait and recompute,
#   memory against the prediction. About a minute. --tiny: inputs/tiny.yaml with 4
#   layers, 2 steps, no checkpoint row.
#   Paper scale: MEMO's 7B (its Table 2: 32 layers, h = 4096, 32 heads, vocabulary
#   50257, padded to 50688 as Megatron does for TP 4; SwiGLU of width 11008 for its GeLU
#   MLP of 16384) on 8 ranks as its TP 4 x CP 2 (parallel.tensor 4 x a zigzag ring of 2),
#   bf16: the longest S of each row, predicted. Budgets:
#   an A800's 80 GB (`--device a100-80gb`: 81,920 MiB) less a 4,096 MiB reserve, less
#   the model states Megatron's TP 4 leaves
#   on a GPU (bf16 weights 2 + fp32 gradients 4 + optimizer 12 / (DP x CP) bytes per
#   parameter, over TP: 3 bytes), the rest for activations (--activation-mib); host:
#   MEMO's 2 TB per 8-GPU node (--host-mib).
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
keep cap_gbs "$gbs"
echo "copy engine capped at $gbs GB/s: one layer's forward time moves x, o and half of the rest"
cap=(--set memory.policy=offload --set memory.offload_bandwidth_gbs="$gbs")
run_row full 1 "full (nothing swapped or recomputed)" "$deck" "${base[@]}" --set memory.policy=full
((tiny)) || run_row checkpoint 1 "checkpoint (whole-layer recomputation)" "$deck" "${base[@]}" \
  --set memory.policy=checkpoint
run_row recompute_noplan 1 "full recomputation (alpha = 0), no memory plan" "$deck" "${base[@]}" "${cap[@]}" \
  --set memory.offload_alpha=0 --set memory.planner=none
run_row recompute 1 "full recomputation (alpha = 0) + memory plan" "$deck" "${base[@]}" "${cap[@]}" \
  --set memory.offload_alpha=0
run_row swap 1 "full swap (alpha = 1) + memory plan" "$deck" "${base[@]}" "${cap[@]}" --set memory.offload_alpha=1
run_row memo 1 "MEMO (alpha auto) + memory plan" "$deck" "${base[@]}" "${cap[@]}" --set memory.offload_alpha=auto

# Paper scale: MEMO's 7B on 8 ranks, TP 4 x CP 2, the longest S of each row.
read -r -a shape <<< "$("$py" "$root/analysis/seed/seed_papers.py" memo-sets 7B 4)"
big=(--set parallel.tensor=4 --set parallel.ulysses=1 --set parallel.ring=2 --set parallel.zero=1 --set memory.optimizer_offload=false
  "${shape[@]}" --set memory.policy=offload)
act=$(budget_after_states a100-80gb "$(params_of "$root/inputs/llama2_7b.yaml" "${shape[@]}")" 3)
host=$(awk 'BEGIN { printf "%d", 2e12 / 8 / 1048576 }')  # MEMO's 2 TB of host memory per 8-GPU node
keep activation_budget_mib "$act"
keep host_mib "$host"
fit=(--max-seq-len --activation-mib "$act" --host-mib "$host")
plan_row gpu_recompute_noplan 8 "full recomputation, no memory plan" "$root/inputs/llama2_7b.yaml" "${big[@]}" \
  --set memory.offload_alpha=0 --set memory.planner=none "${fit[@]}"
plan_row gpu_recompute 8 "full recomputation + memory plan" "$root/inputs/llama2_7b.yaml" "${big[@]}" \
  --set memory.offload_alpha=0 "${fit[@]}"
plan_row gpu_swap 8 "full swap + memory plan" "$root/inputs/llama2_7b.yaml" "${big[@]}" \
  --set memory.offload_alpha=1 "${fit[@]}"

analyse
