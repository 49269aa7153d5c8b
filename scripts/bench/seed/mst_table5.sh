#!/usr/bin/env bash
# MsT (arXiv 2407.15892) Table 5: training time per step of standard training,
# activation recomputation and MsT on one A100 80G; at equal batch size MsT's step
# is 15.8% (Llama-3-8B, batch 2) and 7.2% (Llama-2-7B, batch 8) longer than
# recomputation's. Time needs the hardware, so this table compares ratios.
#   CPU scale: the three stacks on one rank, bf16, 3 steps each (the first a
#   warm-up), at the same S and batch: step time, model GFLOP/s, MFU, peak memory
#   against the prediction; MsT with the paper's counts (M = 4 in the MLP, 16 in the
#   LM head, its Section 5.2). Two shapes of d = 1024 at S = 2048: Llama-3's ratios
#   (inputs/step_cpu.yaml: GQA 16/4, I = 3.5 d, V = 31 d) and Llama-2's (multi-head,
#   I = 2.7 d, V = 7.8 d). About a minute and a half.
#   --tiny: inputs/tiny.yaml in bf16, 2 steps.
#   scripts/bench/seed/mst_table5.sh [--tiny]
# The activation-recomputation rows need memory.policy hf_checkpoint; a build
# without it skips them.
source "$(dirname "$0")/lib.sh"

mst="--set memory.policy=checkpoint --set mst.mlp_chunks=4 --set mst.lm_head_chunks=16"  # MsT's Section 5.2
stacks=(  # name|label|settings
  "vanilla|standard (vanilla)|--set memory.policy=vanilla"
  "recomputation|activation recomputation (Hugging Face)|--set memory.policy=hf_checkpoint"
  "mst|MsT (recomputation + mini-sequences)|$mst"
)
shapes=(  # name|deck|--set arguments
  "llama3|$root/inputs/step_cpu.yaml|"
  "llama2|$root/inputs/step_cpu.yaml|--set model.kv_heads=16 --set model.intermediate=2752 --set model.vocab=8000"
)
steps=(--set run.precision=bf16 --set run.steps=3 --set run.warmup_steps=1)
if ((tiny)); then
  shapes=("tiny|$root/inputs/tiny.yaml|")
  steps=(--set run.precision=bf16 --set run.steps=2 --set run.warmup_steps=1)
fi
for sh in "${shapes[@]}"; do
  IFS='|' read -r shape deck shape_sets <<< "$sh"
  read -r -a shape_sets <<< "$shape_sets"
  for s in "${stacks[@]}"; do
    IFS='|' read -r name label settings <<< "$s"
    read -r -a sets <<< "$settings"
    if ! has_choice memory.policy "$(policy_of "$settings")"; then
      skip_row "${shape}_$name" 1 "$label" "this build has no memory.policy $(policy_of "$settings")"
      continue
    fi
    run_row "${shape}_$name" 1 "$label" "$deck" "${steps[@]}" "${shape_sets[@]}" "${sets[@]}"
  done
done

analyse
