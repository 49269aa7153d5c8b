#!/usr/bin/env bash
# MsT (arXiv 2407.15892) Table 4: the longest sequence on one A100 80G with
# gradient accumulation, activation recomputation vs MsT, Llama-3-8B and
# Llama-2-7B. Accumulating gradients over micro-steps keeps a gradient buffer for
# the whole step, which the optimizer-in-backward of Tables 2-3 does without.
#   CPU scale: both stacks on one rank of inputs/max_seq_cpu.yaml (float, model
#   states on the device), run.grad_accum = 2: the longest S within 64 MiB (--tiny:
#   40 MiB, and only MsT's row runs), predicted, then one step of two micro-steps at
#   it, memory against the prediction. Under half a minute.
#   Paper scale: inputs/llama3_8b.yaml and inputs/llama2_7b.yaml on one rank, bf16,
#   predicted under MsT's accounting with the gradient buffer added: an A100
#   80GB's 81,920 MiB less a 4,096 MiB reserve, less 2 + 4 + 2 bytes per parameter
#   (bf16 weights, AdamW moments, bf16 gradients: MsT's Tables 9-10's 15, 30 and
#   15 GB for Llama-3-8B), the rest for activations (minilst plan --activation-mib).
#   scripts/bench/seed/mst_table4.sh [--tiny]
# The activation-recomputation rows need memory.policy hf_checkpoint; a build
# without it skips them.
source "$(dirname "$0")/lib.sh"

stacks=(  # name|label|policy
  "recomputation|activation recomputation (Hugging Face)|hf_checkpoint"
  "mst|MsT (recomputation + mini-sequences)|checkpoint"
)
accum=(--set run.grad_accum=2)

budget=64
((tiny)) && budget=40
keep cpu_budget_mib "$budget"
deck="$root/inputs/max_seq_cpu.yaml"
for s in "${stacks[@]}"; do
  IFS='|' read -r name label policy <<< "$s"
  if ! has_choice memory.policy "$policy"; then
    skip_row "cpu_$name" 1 "$label" "this build has no memory.policy $policy"
    continue
  fi
  plan_row "cpu_$name" 1 "$label" "$deck" "${accum[@]}" --set memory.policy="$policy" --max-seq-len \
    --device-mib "$budget"
  [[ -f $out/cpu_$name.json ]] || continue
  ((tiny)) && [[ $name != mst ]] && continue  # --tiny: MsT's row runs
  run_row "cpu_${name}_run" 1 "$label" "$deck" "${accum[@]}" --set memory.policy="$policy" \
    --set run.seq_len="$(json_field "cpu_$name" seq_len)"
done

one=(--set parallel.ulysses=1 --set parallel.zero=0 --set memory.optimizer_offload=false)
for model in llama3_8b llama2_7b; do
  deck="$root/inputs/$model.yaml"
  act=$(budget_after_states a100-80gb "$(params_of "$deck")" 8)  # bf16 weights 2 + AdamW moments 4 + bf16 gradients 2
  keep "${model}_activation_budget_mib" "$act"
  for s in "${stacks[@]}"; do
    IFS='|' read -r name label policy <<< "$s"
    if ! has_choice memory.policy "$policy"; then
      skip_row "${model}_$name" 1 "$label" "this build has no memory.policy $policy"
      continue
    fi
    plan_row "${model}_$name" 1 "$label" "$deck" "${one[@]}" "${accum[@]}" --set memory.policy="$policy" \
      --max-seq-len --activation-mib "$act"
  done
done

analyse
