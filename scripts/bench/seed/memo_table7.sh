#!/usr/bin/env bash
# MEMO (arXiv 2407.12117) Table 7: the swapped token fraction alpha its rule chooses
# against the sequence length: a layer's forward time grows faster with S
# (attention is quadratic) than the bytes to swap (linear), so the longer the
# sequence the more of it hides behind compute, until the host memory bounds it.
#   CPU scale: one rank of inputs/offload_cpu.yaml (8 layers, d = 384), float: a
#   calibration run at S = 1024 sets a copy-engine cap at which one layer's forward
#   time moves x, o and half of the rest, then memory.policy offload with
#   offload_alpha auto at S = 512 to 4096 (2 steps each: the first measures, the
#   second uses the chosen alpha); each alpha is checked against the rule
#   recomputed from the run's own measurements. About a minute. --tiny: the tiny
#   deck with 4 layers at S = 32, 64, 128.
#   Paper scale: inputs/llama2_7b.yaml (MEMO's 7B size) on 8 ranks, bf16, S = 128K
#   to 1M: the host memory of alpha = 0 and 1 predicted, hence the largest alpha
#   MEMO's 2 TB per 8-GPU server allows (its second constraint); the first (time)
#   needs the hardware.
#   scripts/bench/seed/memo_table7.sh [--tiny]
source "$(dirname "$0")/lib.sh"

deck="$root/inputs/offload_cpu.yaml"
base=(--set run.steps=2 --set run.warmup_steps=1 --set memory.policy=offload)
seqs=(512 1024 2048 4096)
calib=1024
if ((tiny)); then
  deck="$root/inputs/tiny.yaml"
  base+=(--set model.layers=4)
  seqs=(32 64 128)
  calib=64
fi
run_row cal 1 "calibration at S = $calib: alpha = 1, unthrottled" "$deck" "${base[@]}" --set run.seq_len=$calib \
  --set memory.offload_alpha=1
gbs=$(half_swap_gbs "$out/cal.h5")
echo "$gbs" > "$out/cap_gbs.txt"
echo "copy engine capped at $gbs GB/s"
for S in "${seqs[@]}"; do
  run_row "s$S" 1 "S = $S" "$deck" "${base[@]}" --set run.seq_len="$S" --set memory.offload_alpha=auto \
    --set memory.offload_bandwidth_gbs="$gbs"
done

big=(--set parallel.ulysses=8 --set memory.policy=offload)
for S in 131072 262144 524288 1048576; do
  for a in 0 1; do
    plan_row "gpu_s${S}_a$a" 8 "S = $S, alpha = $a" "$root/inputs/llama2_7b.yaml" "${big[@]}" \
      --set run.seq_len="$S" --set memory.offload_alpha=$a
  done
done

analyse
