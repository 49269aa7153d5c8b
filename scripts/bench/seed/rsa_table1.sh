#!/usr/bin/env bash
# RSA (Li et al., arXiv 2105.13120) Table 1: the memory of the MLP block per device
# under tensor parallelism (32H^2/N + 4BLH/N + BLH) and sequence parallelism
# (32H^2 + 5BLH/N), B batch, L sequence, H hidden, N devices: sequence
# parallelism keeps the weights whole and splits the activations, so it wins when
# BL > 32H; and its MLP sends nothing.
#   CPU scale: inputs/scaling_cpu.yaml at H = 128, multi-head (4 heads, 4 kv heads),
#   the paper's MLP width I = 4H = 512, float, S = 8192 (BL > 32H: the regime where
#   sequence parallelism wins), on a ring of N = 1, 2, 4 ranks, one step each,
#   with memory.policy vanilla (the MLP keeps its input and intermediates for the
#   backward, as the paper counts) and full (it keeps none): their difference is
#   the MLP's activations, measured. About 20 s. --tiny: S = 512, N = 1, 2.
#   Paper scale: a BERT-Base-sized decoder (12 layers, H = 768, 12 heads, I = 3072,
#   V = 30522, float) at L = 32768 on N = 4 to 64 ranks, predicted by minilst plan.
#   Tensor parallelism: the same runs and plans with parallel.tensor = N (ring 1; CPU scale N = 2, 4,
#   --tiny 2; paper scale N = 2, 4 (dividing its 12 heads and L), with the vocabulary padded to
#   30720, as Megatron pads it to a multiple of 128 N), beside the paper's tensor-parallel formula.
#   Formulas evaluated with B = 1 (miniLST trains one sequence per micro-step).
#   scripts/bench/seed/rsa_table1.sh [--tiny]
source "$(dirname "$0")/lib.sh"

shape=(--set model.hidden=128 --set model.heads=4 --set model.kv_heads=4 --set model.intermediate=512
  --set run.steps=1 --set run.warmup_steps=0
  --set parallel.ring_layout=contiguous)
S=8192
ranks=(1 2 4)
((tiny)) && { S=512; ranks=(1 2); }
for n in "${ranks[@]}"; do
  for policy in vanilla full; do
    run_row "cpu_n${n}_$policy" "$n" "N = $n, $policy" "$root/inputs/scaling_cpu.yaml" "${shape[@]}" \
      --set run.seq_len=$S --set parallel.ring="$n" --set memory.policy=$policy
  done
done

tp_ranks=(2 4)
((tiny)) && tp_ranks=(2)
for n in "${tp_ranks[@]}"; do
  for policy in vanilla full; do
    run_row "tp_cpu_n${n}_$policy" "$n" "TP N = $n, $policy" "$root/inputs/scaling_cpu.yaml" "${shape[@]}" \
      --set run.seq_len=$S --set parallel.tensor="$n" --set memory.policy=$policy
  done
done

bert=(--set model.layers=12 --set model.hidden=768 --set model.heads=12 --set model.kv_heads=12
  --set model.intermediate=3072 --set model.vocab=30522 --set run.seq_len=32768 --set parallel.ring_layout=contiguous)
gpu=(4 8 16 32 64)
((tiny)) && gpu=(4 64)
for n in "${gpu[@]}"; do
  for policy in vanilla full; do
    plan_row "gpu_n${n}_$policy" "$n" "N = $n, $policy" "$root/inputs/scaling_cpu.yaml" "${bert[@]}" \
      --set parallel.ring="$n" --set memory.policy=$policy
  done
done
for n in 2 4; do  # (N divides the 12 heads and the length)
  for policy in vanilla full; do
    plan_row "tp_gpu_n${n}_$policy" "$n" "TP N = $n, $policy" "$root/inputs/scaling_cpu.yaml" "${bert[@]}" \
      --set model.vocab=30720 --set parallel.tensor="$n" --set memory.policy=$policy
  done
done

analyse
