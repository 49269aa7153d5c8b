#!/usr/bin/env bash
# ALST (arXiv 2506.13996) Table 1: the feature ablation ladder on Llama-8B, one
# node of 8 H100s: baseline (ZeRO-3, activation checkpointing, optimizer states on
# the CPU) -> + tiled logits & loss -> + Ulysses -> + tiled MLP, or + activation
# checkpoint offload -> all; the longest sequence and the iteration time of each.
# With Section 5.5's baseline-vs-ALST rows on 1 GPU, 1 node and 4 nodes (32 GPUs), and UPipe's
# records (head-chunked Ulysses) on 8 and 16 GPUs.
#   CPU scale: the same ladder on 2 ranks of inputs/max_seq_cpu.yaml (ZeRO-3,
#   optimizer offload): the longest S within a per-rank device budget (minilst plan
#   --max-seq-len), then one step at that S: its time, and its memory against the
#   prediction. Budget 64 MiB per rank (--tiny: 24 MiB, and only the first and last
#   rungs run), about a minute.
#   Paper scale: inputs/llama3_8b.yaml in bf16, predicted. Devices: H100 80GB
#   (`--device h100-80gb`: 81,559 MiB) less a 4,096 MiB reserve (`--reserve-mib`:
#   CUDA context, NCCL). Host memory: the node's 1.9 TB (ALST Section 5.3)
#   shared by its 8 GPUs, so 1.9 TB / 8 per rank on 8 and 32 ranks and all of it
#   on one. The longest S of each rung on 8 ranks, of baseline and ALST on 1 and
#   32; and (not in --tiny) the model FLOPs per rank
#   of a step at the paper's S beside the FLOPs its TFLOPS x iteration time imply.
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
rung_sets() {  # rung_sets POLICY ULYSSES MLP LM [HEAD_CHUNKS]: the --set arguments of a rung (ALST's
  # Ulysses attends over every head at once: head chunks 1 unless given)
  echo "--set memory.policy=$1 --set parallel.ulysses=$2 --set mst.mlp_chunks=$3 --set mst.lm_head_chunks=$4" \
    "--set parallel.ulysses_head_chunks=${5:-1}"
}

# CPU scale: 2 ranks, ZeRO-3 over both, AdamW on the host.
cpu_deck="$root/inputs/max_seq_cpu.yaml"
budget=64
((tiny)) && budget=24
keep cpu_budget_mib "$budget"
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
  ((tiny)) && [[ $name != base && $name != all ]] && continue  # --tiny: the first and last rungs run
  run_row "cpu_${name}_run" 2 "$label" "$cpu_deck" "${sets[@]}" --set run.seq_len="$(json_field "cpu_$name" seq_len)"
done

# Paper scale: Llama-3-8B, predictions only.
deck="$root/inputs/llama3_8b.yaml"
node_mib=$(awk 'BEGIN { printf "%d", 1.9e12 / 1048576 }')  # ALST's 1.9 TB of host memory per node
keep node_host_mib "$node_mib"
keep device_mib "$(device_fit_mib h100-80gb)"  # the device budget per rank: 81,559 MiB less the reserve
read -r -a h100 <<< "$(device_args h100-80gb)"
per_gpu=("${h100[@]}" --host-mib $((node_mib / 8)))
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
  plan_row "gpu8_$name" 8 "$label" "$deck" "${sets[@]}" --max-seq-len "${per_gpu[@]}"
  ((tiny)) || plan_row "gpu8_${name}_at_paper_s" 8 "$label" "$deck" "${sets[@]}" --set run.seq_len="${paper_seq[$name]}"
done

# UPipe's records (arXiv 2602.21196): ALST's setting with Ulysses over chunks of heads (auto: the count
# of the longest plan), on 8 GPUs and on 16 (Ulysses over all 16: two nodes' host memory, 1.9 TB / 8 each).
for g in 8 16; do
  read -r -a sets <<< "$(rung_sets checkpoint_offload "$g" auto auto auto)"
  plan_row "gpu${g}_upipe" "$g" "head-chunked Ulysses" "$deck" "${sets[@]}" --max-seq-len "${per_gpu[@]}"
done

# Section 5.5: baseline and ALST on one GPU (ZeRO-Offload: stage 2, AdamW on the host; the node's
# whole host memory) and on 32 (4 nodes, Ulysses over all 32).
for g in 1 32; do
  if ((g == 1)); then
    layout=(--set parallel.zero=2)
    budgets=("${h100[@]}" --host-mib "$node_mib")
    paper_s=500000
  else
    layout=()
    budgets=("${per_gpu[@]}")
    paper_s=15000000
  fi
  if has_choice memory.policy hf_checkpoint; then
    read -r -a sets <<< "$(rung_sets hf_checkpoint 1 1 1)"
    plan_row "gpu${g}_base" "$g" "baseline" "$deck" "${layout[@]}" "${sets[@]}" --max-seq-len "${budgets[@]}"
    ((tiny)) || plan_row "gpu${g}_base_at_paper_s" "$g" "baseline" "$deck" "${layout[@]}" "${sets[@]}" \
      --set run.seq_len=32000
  else
    skip_row "gpu${g}_base" "$g" "baseline" "this build has no memory.policy hf_checkpoint"
  fi
  read -r -a sets <<< "$(rung_sets checkpoint_offload "$g" auto auto)"
  plan_row "gpu${g}_all" "$g" "ALST" "$deck" "${layout[@]}" "${sets[@]}" --max-seq-len "${budgets[@]}"
  ((tiny)) || plan_row "gpu${g}_all_at_paper_s" "$g" "ALST" "$deck" "${layout[@]}" "${sets[@]}" \
    --set run.seq_len="$paper_s"
done

analyse
