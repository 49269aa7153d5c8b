#!/usr/bin/env bash
# RSA (Li et al., arXiv 2105.13120) Table 2 and its communication analysis: the
# memory of the multi-head attention block per device under tensor parallelism
# (16AZH/N + 4BLZA/N + BZL^2/N + BLH) and sequence parallelism with Ring
# Self-Attention (16AZH + 4BZLA/N + BZL^2/N + BLH/N), A head size, Z heads; and
# the bytes each sends per layer: 8(N-1)BZ(L/N)A both (RSA: 2(N-1)BZ(L/N)A
# forward, two ring passes; 6(N-1)BZ(L/N)A backward, two ring passes and two
# all-reduces).
#   CPU scale: inputs/scaling_cpu.yaml at H = 128, multi-head (4 heads of A = 32, 4
#   kv heads), float, S = 3072 (BL > 16AZ = 2048: sequence parallelism's regime),
#   memory.policy full, a contiguous ring of N = 2 and 4 ranks with
#   parallel.ring_variant rsa and RSA's own backward (parallel.rsa_backward seed),
#   and the flash ring beside it; one step: memory per category and bytes sent per
#   operation, measured (and equal to the models). About a minute (RSA's kernels
#   hold and walk the [L/N, L] probabilities). --tiny: S = 512, N = 2.
#   Paper scale: a BERT-Base-sized decoder (12 layers, H = 768, Z = 12, A = 64, float)
#   at L = 32768 on N = 4 to 64 ranks, predicted by minilst plan.
#   Formulas evaluated with B = 1 (miniLST trains one sequence per micro-step).
#   scripts/bench/seed/rsa_table2.sh [--tiny]
# The seed-backward rows need parallel.rsa_backward; a build without it runs RSA
# with the flash backward and says so.
source "$(dirname "$0")/lib.sh"

rsa=(--set parallel.ring_variant=rsa)
has_key parallel.rsa_backward && rsa+=(--set parallel.rsa_backward=seed)
has_key parallel.rsa_backward || echo "note: this build has no parallel.rsa_backward: RSA runs with the flash backward"
shape=(--set model.hidden=128 --set model.heads=4 --set model.kv_heads=4 --set model.intermediate=512
  --set run.steps=1 --set run.warmup_steps=0
  --set parallel.ring_layout=contiguous --set memory.policy=full
  --set run.watchdog_s=600)  # RSA's step walks [L/N, L] probabilities: minutes on a busy 2-core machine
S=3072
ranks=(2 4)
((tiny)) && { S=512; ranks=(2); }
for n in "${ranks[@]}"; do
  run_row "cpu_n${n}_rsa" "$n" "N = $n, RSA" "$root/inputs/scaling_cpu.yaml" "${shape[@]}" "${rsa[@]}" \
    --set run.seq_len=$S --set parallel.ring="$n"
  run_row "cpu_n${n}_flash" "$n" "N = $n, flash ring" "$root/inputs/scaling_cpu.yaml" "${shape[@]}" \
    --set run.seq_len=$S --set parallel.ring="$n" --set parallel.ring_variant=flash
done

bert=(--set model.layers=12 --set model.hidden=768 --set model.heads=12 --set model.kv_heads=12
  --set model.intermediate=3072 --set model.vocab=30522 --set run.seq_len=32768 --set parallel.ring_layout=contiguous
  --set memory.policy=full)
gpu=(4 8 16 32 64)
((tiny)) && gpu=(4 64)
for n in "${gpu[@]}"; do
  plan_row "gpu_n${n}_rsa" "$n" "N = $n, RSA" "$root/inputs/scaling_cpu.yaml" "${bert[@]}" "${rsa[@]}" \
    --set parallel.ring="$n"
  plan_row "gpu_n${n}_flash" "$n" "N = $n, flash ring" "$root/inputs/scaling_cpu.yaml" "${bert[@]}" \
    --set parallel.ring="$n" --set parallel.ring_variant=flash
done

analyse
