#!/usr/bin/env bash
# ALST (arXiv 2506.13996) Table 1: the feature ablation ladder on Llama-8B, 8 H100s:
# baseline (ZeRO-3, activation checkpointing, optimizer states on the CPU) ->
# + tiled logits & loss -> + Ulysses -> + tiled MLP, or + activation checkpoint
# offload -> all four; the longest sequence and the iteration time of each. With
# Tables 2-3's one-GPU rows (baseline and ALST on one H100).
#   CPU scale: the same ladder on 2 ranks of inputs/max_seq_cpu.yaml (ZeRO-3,
#   optimizer offload): the longest S within a per-rank device budget (minilst plan
#   --max-seq-len), then one step at that S: its time, and its memory against the
#   prediction. Budget 64 MiB per rank (--tiny: 24 MiB), about a minute.
#   Paper scale: inputs/llama3_8b.yaml in bf16 on 8 ranks (and on 1), 80 GiB
#   devices, 240 GiB of host memory per rank (ALST's 1.9 TB per 8-GPU node):
#   the longest S predicted, and the model FLOPs per rank of a step at the
#   paper's S beside the FLOPs its TFLOPS x iteration time imply (--tiny: the
#   8-rank longest S only).
#   scripts/bench/seed/alst_table1.sh [--tiny]
# The baseline rows need memory.policy hf_checkpoint (Hugging Face's recomputation
# with its whole fp32 logits); a build without it skips them, with a note.
source "$(dirname "$0")/lib.sh"

ladder=(  # name|label|policy|ulysses|mlp_chunks|lm_head_chunks
  "base|baseline|hf_checkpoint|1|1|1"
  "loss|+ tiled logits & loss|checkpoint|1|1|auto"
  "ulysses|+ Ulysses SP|checkpoint|N|1|auto"
  "mlp|+ tiled MLP|checkpoint|N|auto|auto"
  "offload|+ activation checkpoint offload (no tiled MLP)|checkpoint_offload|N|1|auto"
  "all|+ tiled MLP and offload (ALST)|checkpoint_offload|N|auto|auto"
)
rung_sets() {  # rung_sets POLICY ULYSSES MLP LM: the --set arguments of a rung
  echo "--set memory.policy=$1 --set parallel.ulysses=$2 --set mst.mlp_chunks=$3 --set mst.lm_head_chunks=$4"
}

# CPU scale: 2 ranks, ZeRO-3 over both, AdamW on the host.
cpu_deck="$root/inputs/max_seq_cpu.yaml"
budget=64
((tiny)) && budget=24
echo "$budget" > "$out/cpu_budget_mib.txt"
for rung in "${ladder[@]}"; do
  IFS='|' read -r name label policy u mlp lm <<< "$rung"
  [[ $u == N ]] && u=2
  if ! has_choice memory.policy "$policy"; then
    skip_row "cpu_$name" 2 "$label" "this build has no memory.policy $policy"
    continue
  fi
  read -r -a sets <<< "$(rung_sets "$policy" "$u" "$mlp" "$lm")"
  sets+=(--set parallel.zero=3 --set memory.optimizer_offload=true)
  plan_row "cpu_$name" 2 "$label" "$cpu_deck" "${sets[@]}" --max-seq-len --device-mib "$budget"
  [[ -f $out/cpu_$name.json ]] || continue
  run_row "cpu_${name}_run" 2 "$label" "$cpu_deck" "${sets[@]}" --set run.seq_len="$(json_field "cpu_$name" seq_len)"
done

# Paper scale: Llama-3-8B, predictions only.
deck="$root/inputs/llama3_8b.yaml"
budgets=(--device-mib 81920 --host-mib 245760)
# The paper's sequence lengths (K = 10^3, M = 10^6, as ALST counts its 500K and 3.7M).
declare -A paper_seq=([base]=32000 [loss]=160000 [ulysses]=1100000 [mlp]=1200000 [offload]=2400000 [all]=3700000)
for rung in "${ladder[@]}"; do
  IFS='|' read -r name label policy u mlp lm <<< "$rung"
  [[ $u == N ]] && u=8
  if ! has_choice memory.policy "$policy"; then
    skip_row "gpu8_$name" 8 "$label" "this build has no memory.policy $policy"
    continue
  fi
  read -r -a sets <<< "$(rung_sets "$policy" "$u" "$mlp" "$lm")"
  plan_row "gpu8_$name" 8 "$label" "$deck" "${sets[@]}" --max-seq-len "${budgets[@]}"
  ((tiny)) || plan_row "gpu8_${name}_at_paper_s" 8 "$label" "$deck" "${sets[@]}" --set run.seq_len="${paper_seq[$name]}"
done
# Tables 2-3, one GPU: ZeRO-Offload on one device (stage 2, AdamW on the host). Not in --tiny.
((tiny)) && { analyse; exit 0; }
one=(--set parallel.ulysses=1 --set parallel.zero=2)
if has_choice memory.policy hf_checkpoint; then
  read -r -a sets <<< "$(rung_sets hf_checkpoint 1 1 1)"
  plan_row gpu1_base 1 "baseline" "$deck" "${one[@]}" "${sets[@]}" --max-seq-len "${budgets[@]}"
  plan_row gpu1_base_at_paper_s 1 "baseline" "$deck" "${one[@]}" "${sets[@]}" --set run.seq_len=32000
else
  skip_row gpu1_base 1 "baseline" "this build has no memory.policy hf_checkpoint"
fi
read -r -a sets <<< "$(rung_sets checkpoint_offload 1 auto auto)"
plan_row gpu1_all 1 "ALST" "$deck" "${one[@]}" "${sets[@]}" --max-seq-len "${budgets[@]}"
plan_row gpu1_all_at_paper_s 1 "ALST" "$deck" "${one[@]}" "${sets[@]}" --set run.seq_len=500000

analyse
