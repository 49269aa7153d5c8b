#!/usr/bin/env bash
# MsT (arXiv 2407.15892) Table 2: the longest sequence of Llama-3-8B and Llama-2-7B
# on one 80 GB A100, standard training vs activation recomputation vs MsT
# (activation recomputation with mini-sequences in the MLP and the LM head).
#   CPU scale: the three on one rank of inputs/max_seq_cpu.yaml (float, the model
#   states on the device as in MsT): the longest S within a device budget (minilst
#   plan --max-seq-len), then one step at that S, its memory against the
#   prediction. Budget 64 MiB; under a minute. --tiny: 40 MiB, Llama-3 only.
#   Paper scale: inputs/llama3_8b.yaml and inputs/llama2_7b.yaml on one rank, bf16,
#   80 GiB of device and 240 GiB of host memory, predicted (AdamW on the host:
#   ZeRO-Offload, the only way 18 bytes per parameter fit one device).
#   scripts/bench/seed/mst_table2.sh [--tiny]
# The activation-recomputation rows need memory.policy hf_checkpoint (Hugging
# Face's recomputation with its whole fp32 logits); a build without it skips them.
source "$(dirname "$0")/lib.sh"

stacks=(  # name|label|settings
  "vanilla|standard (vanilla)|--set memory.policy=vanilla"
  "ar|activation recomputation (Hugging Face)|--set memory.policy=hf_checkpoint"
  "mst|MsT (recomputation + mini-sequences)|--set memory.policy=checkpoint"
)

budget=64
((tiny)) && budget=40
echo "$budget" > "$out/cpu_budget_mib.txt"
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

one=(--set parallel.ulysses=1 --set parallel.zero=2 --set memory.optimizer_offload=true)
models=(llama3_8b llama2_7b)
((tiny)) && models=(llama3_8b)
for model in "${models[@]}"; do
  for s in "${stacks[@]}"; do
    IFS='|' read -r name label settings <<< "$s"
    read -r -a sets <<< "$settings"
    if ! has_choice memory.policy "$(policy_of "$settings")"; then
      skip_row "${model}_$name" 1 "$label" "this build has no memory.policy $(policy_of "$settings")"
      continue
    fi
    plan_row "${model}_$name" 1 "$label" "$root/inputs/$model.yaml" "${one[@]}" "${sets[@]}" \
      --max-seq-len --device-mib 81920 --host-mib 245760
  done
done

analyse
