#!/usr/bin/env bash
# MsT (arXiv 2407.15892) Table 3: the longest sequence of Llama-2-7B and
# Llama-2-13B on one A100 80G: standard training (Hugging Face Transformers) vs
# activation recomputation vs MsT.
#   Paper scale only (predicted, a few seconds): inputs/llama2_7b.yaml, and the
#   same deck at Llama-2-13B's shape (40 layers, d = 5120, 40 heads, I = 13824),
#   bf16, one rank, under MsT's own budget as in Table 2 (an A100 80GB's 81,920
#   MiB less a 4,096 MiB reserve, less 2 + 4 bytes per parameter of bf16 weights
#   and AdamW moments: the rest for activations, minilst plan --activation-mib),
#   and with the bf16 weights alone on the device (2 bytes per parameter: 13B's
#   weights and moments would leave under 3 GiB). The CPU-scale runs of the three
#   stacks are Table 2's (scripts/bench/seed/mst_table2.sh).
#   scripts/bench/seed/mst_table3.sh [--tiny]   (--tiny: MsT's accounting only)
# The activation-recomputation rows need memory.policy hf_checkpoint; a build
# without it skips them.
source "$(dirname "$0")/lib.sh"

stacks=(  # name|label|policy
  "vanilla|standard (Hugging Face)|vanilla"
  "recomputation|activation recomputation (Hugging Face)|hf_checkpoint"
  "mst|MsT (recomputation + mini-sequences)|checkpoint"
)
l13="--set model.layers=40 --set model.hidden=5120 --set model.heads=40 --set model.kv_heads=40"
models=(  # name|--set arguments on inputs/llama2_7b.yaml
  "llama2_7b|"
  "llama2_13b|$l13 --set model.intermediate=13824"  # Llama-2-13B
)
deck="$root/inputs/llama2_7b.yaml"
one=(--set parallel.ulysses=1 --set parallel.zero=0 --set memory.optimizer_offload=false)
for m in "${models[@]}"; do
  IFS='|' read -r model shape <<< "$m"
  read -r -a shape <<< "$shape"
  params=$(params_of "$deck" "${shape[@]}")
  for b in "6|" "2|_weights"; do  # bytes of state per parameter on the device|row suffix
    IFS='|' read -r bytes suffix <<< "$b"
    ((tiny)) && [[ -n $suffix ]] && continue  # --tiny: MsT's accounting only
    act=$(budget_after_states a100-80gb "$params" "$bytes")
    keep "${model}${suffix}_activation_budget_mib" "$act"
    for s in "${stacks[@]}"; do
      IFS='|' read -r name label policy <<< "$s"
      if ! has_choice memory.policy "$policy"; then
        skip_row "${model}_$name$suffix" 1 "$label" "this build has no memory.policy $policy"
        continue
      fi
      plan_row "${model}_$name$suffix" 1 "$label" "$deck" "${one[@]}" "${shape[@]}" \
        --set memory.policy="$policy" --max-seq-len --activation-mib "$act"
    done
  done
done

analyse
