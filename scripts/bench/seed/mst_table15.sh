#!/usr/bin/env bash
# MsT (arXiv 2407.15892) Table 15: the memory of the MLP block against the
# mini-sequence count M (standard = 1, then 2 to 8) for S = 1K to 80K on
# Llama-3-8B: the block's peak falls with M while its intermediates dominate.
#   CPU scale: minilst_bench_mst, the block alone at Llama-3's ratios (d = 256,
#   I = 896 = 3.5 d, V = 8192 = 32 d), float, S = 1024 to 8192, M = 1 to 32: the
#   measured workspace high-water (and the memory model's, which must equal it),
#   plus the block's inputs, outputs, gradients and weights: its peak. About a
#   minute. --tiny: S = 256 and 1024, M = 1, 2, 4, d = 32.
#   Paper scale: inputs/llama3_8b_layer.yaml (one Llama-3-8B layer with the
#   embedding and LM head, bf16) predicted at the paper's S and M, the other block
#   cut into single-token chunks: the step's workspace high-water is this block's.
#   scripts/bench/seed/mst_table15.sh [--tiny]
source "$(dirname "$0")/lib.sh"

bench_mst_sweep
if ((tiny)); then
  block_plan_rows mlp "1024 80000" "1 8"
else
  block_plan_rows mlp "1024 2048 4096 8192 20000 40000 80000" "1 2 4 8"
fi
analyse
