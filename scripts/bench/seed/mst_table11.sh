#!/usr/bin/env bash
# MsT (arXiv 2407.15892) Table 11 (its Appendix E): distributed training,
# Llama-2-7B on 2, 4 and 8 GPUs with DeepSpeed-Ulysses sequence parallelism, the
# longest sequence with activation recomputation alone and with MsT's
# mini-sequences: both grow linearly with the GPUs, MsT's longer.
#   CPU scale: Ulysses over 2 and 4 ranks (--tiny: 2) of inputs/max_seq_cpu.yaml
#   (float, ZeRO-3, optimizer offload): the longest S within 32 MiB per rank
#   (--tiny: 24), predicted and run for one step. Under a minute; 4 ranks
#   oversubscribe a 2-core machine (correct, not fast).
#   Paper scale: inputs/llama2_7b.yaml, Ulysses over 2, 4 and 8 ranks, bf16,
#   predicted under MsT's single-GPU accounting on every GPU (Table 2's: the bf16
#   weights and AdamW moments whole on the device, 6 bytes per parameter, the rest
#   of an A100 80GB's 81,920 MiB less a 4,096 MiB reserve for activations and
#   Ulysses' buffers; minilst plan --activation-mib). --tiny: 8 ranks only.
#   scripts/bench/seed/mst_table11.sh [--tiny]
# The recomputation rows need memory.policy hf_checkpoint (Hugging Face's, with its
# whole fp32 logits); a build without it skips them.
source "$(dirname "$0")/lib.sh"

stacks=(  # name|label|policy
  "ar|activation recomputation|hf_checkpoint"
  "mst|MsT (recomputation + mini-sequences)|checkpoint"
)
sharded=(--set parallel.zero=3 --set memory.optimizer_offload=true)

budget=32
ranks=(2 4)
((tiny)) && { budget=24; ranks=(2); }
keep cpu_budget_mib "$budget"
for u in "${ranks[@]}"; do
  for s in "${stacks[@]}"; do
    IFS='|' read -r name label policy <<< "$s"
    if ! has_choice memory.policy "$policy"; then
      skip_row "cpu_u${u}_$name" "$u" "$label" "this build has no memory.policy $policy"
      continue
    fi
    sets=("${sharded[@]}" --set parallel.ulysses="$u" --set memory.policy="$policy")
    plan_row "cpu_u${u}_$name" "$u" "$label" "$root/inputs/max_seq_cpu.yaml" "${sets[@]}" \
      --max-seq-len --device-mib "$budget"
    [[ -f $out/cpu_u${u}_$name.json ]] && run_row "cpu_u${u}_${name}_run" "$u" "$label" \
      "$root/inputs/max_seq_cpu.yaml" "${sets[@]}" --set run.seq_len="$(json_field "cpu_u${u}_$name" seq_len)"
  done
done

gpus=(2 4 8)
((tiny)) && gpus=(8)
deck="$root/inputs/llama2_7b.yaml"
act=$(budget_after_states a100-80gb "$(params_of "$deck")" 6)  # bf16 weights 2 + AdamW moments 4 bytes per parameter
keep activation_budget_mib "$act"
for u in "${gpus[@]}"; do
  for s in "${stacks[@]}"; do
    IFS='|' read -r name label policy <<< "$s"
    if ! has_choice memory.policy "$policy"; then
      skip_row "gpu${u}_$name" "$u" "$label" "this build has no memory.policy $policy"
      continue
    fi
    plan_row "gpu${u}_$name" "$u" "$label" "$deck" --set parallel.zero=0 --set memory.optimizer_offload=false \
      --set parallel.ulysses="$u" --set memory.policy="$policy" --max-seq-len --activation-mib "$act"
  done
done

analyse
