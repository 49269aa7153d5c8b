#!/usr/bin/env bash
# MsT (arXiv 2407.15892) Table 3: the longest sequence of other models on one 80 GB
# GPU (Mistral-7B, Qwen2-7B, Gemma-2-9B), standard vs activation recomputation vs
# MsT: the larger the vocabulary against the hidden size, the more MsT's chunked
# LM head gains.
#   CPU scale: each model shrunk to inputs/max_seq_cpu.yaml's size (4 layers, d =
#   128, or 112 for Qwen's 7 heads) keeping its heads : kv heads, I / d and V / d
#   ratios, one rank, float: the longest S within 80 MiB, predicted and run for one
#   step. About a minute. --tiny: Gemma-2 only, 56 MiB.
#   Paper scale: each model's shape on inputs/llama3_8b.yaml, one rank, bf16, 80 GiB
#   device, 240 GiB host (AdamW on the host), predicted. Gemma-2-9B's head dim of
#   256 (q width 4096 > d = 3584) cannot be expressed: its rows use d / heads = 224.
#   scripts/bench/seed/mst_table3.sh [--tiny]
# The activation-recomputation rows need memory.policy hf_checkpoint; a build
# without it skips them.
source "$(dirname "$0")/lib.sh"

stacks=(  # name|label|policy
  "vanilla|standard (vanilla)|vanilla"
  "ar|activation recomputation (Hugging Face)|hf_checkpoint"
  "mst|MsT (recomputation + mini-sequences)|checkpoint"
)
# name|label|paper scale: layers hidden heads kv_heads intermediate vocab|CPU: the same without layers
models=(
  "mistral|Mistral-7B|32 4096 32 8 14336 32000|128 4 1 448 1000"
  "qwen2|Qwen2-7B|28 3584 28 4 18944 152064|112 7 1 592 4752"
  "gemma2|Gemma-2-9B (head dim 224)|42 3584 16 8 14336 256000|128 4 2 512 9143"
)
shape() {  # shape [LAYERS] HIDDEN HEADS KV INTERMEDIATE VOCAB: --set arguments
  (($# == 6)) && { echo -n "--set model.layers=$1 "; shift; }
  echo "--set model.hidden=$1 --set model.heads=$2 --set model.kv_heads=$3" \
    "--set model.intermediate=$4 --set model.vocab=$5"
}

# each_cell SCALE ROW: for every model (--tiny: Gemma-2 only) and stack, ROW NAME LABEL DIMS... with
# the cell's --set arguments in `sets` (DIMS: the model's shape at SCALE, big or small); a stack
# whose policy this build lacks is skipped with the reason. NAME is <model>_<stack>.
each_cell() {
  local scale=$1 row=$2 m s model title big small name label policy dims
  for m in "${models[@]}"; do
    IFS='|' read -r model title big small <<< "$m"
    ((tiny)) && [[ $model != gemma2 ]] && continue
    for s in "${stacks[@]}"; do
      IFS='|' read -r name label policy <<< "$s"
      if ! has_choice memory.policy "$policy"; then
        skip_row "${scale}${model}_$name" 1 "${scale:+$title, }$label" "this build has no memory.policy $policy"
        continue
      fi
      [[ -n $scale ]] && dims=$small || dims=$big
      read -r -a dims <<< "$dims"
      read -r -a sets <<< "$(shape "${dims[@]}") --set memory.policy=$policy"
      "$row" "${model}_$name" "$title, $label" "$label"
    done
  done
}

budget=80
((tiny)) && budget=56
echo "$budget" > "$out/cpu_budget_mib.txt"
cpu_row() {  # the longest S within the CPU budget, predicted, then run for a step
  plan_row "cpu_$1" 1 "$2" "$root/inputs/max_seq_cpu.yaml" "${sets[@]}" --max-seq-len --device-mib "$budget"
  [[ -f $out/cpu_$1.json ]] && run_row "cpu_$1_run" 1 "$2" \
    "$root/inputs/max_seq_cpu.yaml" "${sets[@]}" --set run.seq_len="$(json_field "cpu_$1" seq_len)"
  return 0
}
each_cell cpu_ cpu_row

one=(--set parallel.ulysses=1 --set parallel.zero=2 --set memory.optimizer_offload=true)
paper_row() {  # the longest S on one 80 GiB device with 240 GiB of host, predicted
  plan_row "$1" 1 "$3" "$root/inputs/llama3_8b.yaml" "${one[@]}" "${sets[@]}" \
    --max-seq-len --device-mib 81920 --host-mib 245760
}
each_cell "" paper_row

analyse
