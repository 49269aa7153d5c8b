#!/usr/bin/env bash
# MEMO (arXiv 2407.12117) Table 7: the parallelism strategy (TP, CP, DP, PP) and the
# CPU offload fraction alpha MEMO chose for each workload of its Table 3 (7B on 8
# GPUs, 13B on 16, 30B on 32, 65B on 64; S = 64K to 1408K). alpha is only ever 0,
# 1/8, 1/4, 1/2 or 1, and is chosen together with TP and CP.
#   CPU scale: MEMO's rule itself. One rank of inputs/offload_cpu.yaml (8 layers, d =
#   384), float: a calibration run at S = 1024 sets a copy-engine cap at which one
#   layer's forward moves x, o and half of the rest, then memory.policy offload with
#   offload_alpha auto at S = 512 to 4096 (2 steps each: the first measures, the
#   second uses the chosen alpha); each alpha is checked against the rule
#   recomputed from the run's own measurements. About a minute. --tiny: the tiny
#   deck with 4 layers at S = 32 and 128.
#   Paper scale: each workload of Table 7 (7B, 13B, 30B, 65B on 8 to 64 GPUs; --tiny:
#   7B at 128K, 256K, 512K and 1024K) on its GPUs, MEMO's GPT shape (its Table 2)
#   with TP as parallel.tensor (the vocabulary padded as Megatron pads it), CP as a
#   zigzag ring and DP as data parallelism, bf16: the host
#   and device memory at alpha = 0 and 1 predicted, from which the analysis applies
#   miniLST's alpha rule (offload_alpha auto: the largest alpha whose copy hides
#   behind a layer's forward and whose host copies fit MEMO's 2 TB per 8 GPUs), and
#   whether the device holds it: an A800 (an A100's 80 GB) less minilst plan's reserve.
#   Workloads with pipeline parallelism (PP > 1) are skipped: miniLST has none.
#   scripts/bench/seed/memo_table7.sh [--tiny]
source "$(dirname "$0")/lib.sh"

deck="$root/inputs/offload_cpu.yaml"
base=(--set run.steps=2 --set run.warmup_steps=1 --set memory.policy=offload)
seqs=(512 1024 2048 4096)
calib=1024
if ((tiny)); then
  deck="$root/inputs/tiny.yaml"
  base+=(--set model.layers=4)
  seqs=(32 128)
  calib=64
fi
run_row cal 1 "calibration at S = $calib: alpha = 1, unthrottled" "$deck" "${base[@]}" --set run.seq_len=$calib \
  --set memory.offload_alpha=1
gbs=$(half_swap_gbs "$out/cal.h5")
keep cap_gbs "$gbs"
echo "copy engine capped at $gbs GB/s"
for S in "${seqs[@]}"; do
  run_row "s$S" 1 "S = $S" "$deck" "${base[@]}" --set run.seq_len="$S" --set memory.offload_alpha=auto \
    --set memory.offload_bandwidth_gbs="$gbs"
done

# Paper scale: host and device memory at alpha = 0 and 1 for each workload (gpu_<G>_<model>_<column>_a<alpha>),
# and for the 7B model with TP 8 at 192K, where MEMO's text puts the end of the link's shortfall (gpu_cal_a<alpha>).
llama="$root/inputs/llama2_7b.yaml"
workload() {  # workload NAME MODEL S TP CP DP: the two plans of one workload
  local name=$1 model=$2 S=$3 tp=$4 cp=$5 dp=$6 a shape
  read -r -a shape <<< "$("$py" "$root/analysis/seed/seed_papers.py" memo-sets "$model" "$tp")"
  for a in 0 1; do
    plan_row "${name}_a$a" $((tp * cp * dp)) "$model, S = $S, TP $tp x CP $cp x DP $dp, alpha = $a" "$llama" \
      "${shape[@]}" --set parallel.tensor="$tp" --set parallel.ulysses=1 --set parallel.ring="$cp" --set parallel.zero=1 \
      --set memory.optimizer_offload=false --set memory.policy=offload --set memory.offload_alpha=$a \
      --set run.seq_len="$S" > /dev/null
  done
}
keep device_mib "$(device_fit_mib a100-80gb)"  # MEMO's A800: 81,920 MiB less the reserve
workload gpu_cal 7B 196608 8 1 1
groups=(8/7B 16/13B 32/30B 64/65B)
((tiny)) && groups=(8/7B)
for g in "${groups[@]}"; do
  model=${g#*/}
  while read -r col S tp cp dp pp; do
    if ((tiny)); then
      case $col in 128K | 256K | 512K | 1024K) ;; *) continue ;; esac  # --tiny: four 7B workloads
    fi
    name="gpu_${g%/*}_${model}_$col"
    if ((pp > 1)); then
      skip_row "${name}_a0" $((tp * cp * dp * pp)) "$model, S = $col" "pipeline parallelism (PP $pp): miniLST has none"
      continue
    fi
    workload "$name" "$model" "$S" "$tp" "$cp" "$dp"
  done < <("$py" "$root/analysis/seed/seed_papers.py" memo-configs "$g")
done

analyse
