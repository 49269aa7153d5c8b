#!/usr/bin/env bash
# MsT (arXiv 2407.15892) Table 2: the longest sequence of Llama-3-8B on one A100
# 80G, standard training vs activation recomputation vs MsT (recomputation with
# mini-sequences in the MLP and the LM head).
#   CPU scale: the three on one rank of inputs/max_seq_cpu.yaml (float, the model
#   states on the device as in MsT): the longest S within a device budget (minilst
#   plan --max-seq-len), then one step at that S, its memory against the
#   prediction. Budget 64 MiB; under a minute. --tiny: 40 MiB.
#   Paper scale: inputs/llama3_8b.yaml on one rank, bf16, predicted under MsT's own
#   memory budget: the optimizer runs in the backward (no gradient buffer), so the
#   device holds the bf16 weights (2 bytes per parameter) and the AdamW moments
#   (4 bytes, MsT's Tables 9-10 list them as 15 and 30 GB), and the rest of an
#   A100 80GB's 81,920 MiB (`minilst plan --device list`: a100-80gb) less a 4,096
#   MiB reserve is the activation budget (minilst plan --activation-mib).
#   scripts/bench/seed/mst_table2.sh [--tiny]
# The activation-recomputation rows need memory.policy hf_checkpoint (Hugging
# Face's recomputation with its whole fp32 logits); a build without it skips them.
source "$(dirname "$0")/lib.sh"

stacks=(  # name|label|settings
  "vanilla|standard (vanilla)|--set memory.policy=vanilla"
  "recomputation|activation recomputation (Hugging Face)|--set memory.policy=hf_checkpoint"
  "mst|MsT (recomputation + mini-sequences)|--set memory.policy=checkpoint"
)

budget=64
((tiny)) && budget=40
keep cpu_budget_mib "$budget"
deck="$root/inputs/max_seq_cpu.yaml"
for s in "${stacks[@]}"; do
  IFS='|' read -r name label settings <<< "$s"
  read -r -a sets <<< "$settings"
  if ! has_choice memory.policy "$(policy_of "$settings")"; then
    skip_row "cpu_$name" 1 "$label" "this build has no memory.policy $(policy_of "$settings")"
    continue
  fi
  plan_row "cpu_$name" 1 "$label" "$deck" "${sets[@]}" --max-seq-len --device-mib "$budget"
  [[ -f $out/cpu_$name.json ]] && run_row "cpu_${name}_run" 1 "$label" "$deck" "${sets[@]}" \
    --set run.seq_len="$(json_field "cpu_$name" seq_len)"
done

# Paper scale: one device, model states whole (ZeRO 0), the activation budget MsT leaves.
deck="$root/inputs/llama3_8b.yaml"
one=(--set parallel.ulysses=1 --set parallel.zero=0 --set memory.optimizer_offload=false)
act=$(budget_after_states a100-80gb "$(params_of "$deck")" 6)  # bf16 weights 2 + AdamW moments 4 bytes per parameter
keep activation_budget_mib "$act"
for s in "${stacks[@]}"; do
  IFS='|' read -r name label settings <<< "$s"
  read -r -a sets <<< "$settings"
  if ! has_choice memory.policy "$(policy_of "$settings")"; then
    skip_row "llama3_8b_$name" 1 "$label" "this build has no memory.policy $(policy_of "$settings")"
    continue
  fi
  plan_row "llama3_8b_$name" 1 "$label" "$deck" "${one[@]}" "${sets[@]}" --max-seq-len --activation-mib "$act"
done

analyse
