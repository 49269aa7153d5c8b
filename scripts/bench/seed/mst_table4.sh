#!/usr/bin/env bash
# MsT (arXiv 2407.15892) Table 4: training time per step and throughput, standard
# vs activation recomputation vs MsT at the same sequence length: MsT's chunks cost
# little time while they cut the intermediates.
#   CPU scale: one rank of inputs/step_cpu.yaml (1 layer, d = 1024, V = 32000,
#   S = 2048) in bf16, the three stacks, 3 steps each (the first a warm-up):
#   step time, model GFLOP/s, MFU, peak memory against the prediction; MsT with
#   its Llama-3 chunk counts (4 MLP, 16 LM head). About half a minute.
#   --tiny: inputs/tiny.yaml in bf16, 2 steps.
#   Paper scale: Llama-3-8B on one rank at S = 8192, bf16, predicted: device
#   memory and model FLOPs per step (time cannot be predicted).
#   scripts/bench/seed/mst_table4.sh [--tiny]
# The activation-recomputation rows need memory.policy hf_checkpoint; a build
# without it skips them.
source "$(dirname "$0")/lib.sh"

mst="--set memory.policy=checkpoint --set mst.mlp_chunks=4 --set mst.lm_head_chunks=16"  # MsT's Llama-3 counts
stacks=(  # name|label|settings
  "vanilla|standard (vanilla)|--set memory.policy=vanilla"
  "ar|activation recomputation (Hugging Face)|--set memory.policy=hf_checkpoint"
  "mst|MsT (recomputation + mini-sequences)|$mst"
)

deck="$root/inputs/step_cpu.yaml"
steps=(--set run.precision=bf16 --set run.steps=3 --set run.warmup_steps=1)
if ((tiny)); then
  deck="$root/inputs/tiny.yaml"
  steps=(--set run.precision=bf16 --set run.steps=2 --set run.warmup_steps=1)
fi
for s in "${stacks[@]}"; do
  IFS='|' read -r name label settings <<< "$s"
  read -r -a sets <<< "$settings"
  if ! has_choice memory.policy "$(policy_of "$settings")"; then
    skip_row "cpu_$name" 1 "$label" "this build has no memory.policy $(policy_of "$settings")"
    continue
  fi
  run_row "cpu_$name" 1 "$label" "$deck" "${steps[@]}" "${sets[@]}"
done

one=(--set parallel.ulysses=1 --set parallel.zero=2 --set memory.optimizer_offload=true --set run.seq_len=8192)
for s in "${stacks[@]}"; do
  IFS='|' read -r name label settings <<< "$s"
  read -r -a sets <<< "$settings"
  if ! has_choice memory.policy "$(policy_of "$settings")"; then
    skip_row "llama3_8b_$name" 1 "$label" "this build has no memory.policy $(policy_of "$settings")"
    continue
  fi
  plan_row "llama3_8b_$name" 1 "$label" "$root/inputs/llama3_8b.yaml" "${one[@]}" "${sets[@]}"
done

analyse
