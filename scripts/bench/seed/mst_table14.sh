#!/usr/bin/env bash
# MsT (arXiv 2407.15892) Table 14: the execution time of the MLP block (forward +
# backward) against the mini-sequence count M (standard = 1, then 2 to 32) for
# S = 1K to 80K on Llama-3-8B: chunks cost time only where they are short.
#   CPU scale: minilst_bench_mst, the block alone at Llama-3's ratios (d = 256,
#   I = 896 = 3.5 d, V = 8192 = 32 d), float, S = 1024 to 8192, M = 1 to 32, median
#   of 3 repeats (it times both blocks; this table reads mlp). About a minute.
#   --tiny: S = 64 and 256, M = 1, 2, 4, d = 32.
#   Paper scale: not predicted (time needs the hardware).
#   scripts/bench/seed/mst_table14.sh [--tiny]
source "$(dirname "$0")/lib.sh"

if ((tiny)); then
  bench_mst_row cpu_bench "d = 32, I = 112, V = 1024" --seq-lens 64,256 --chunks 1,2,4 --hidden 32 \
    --intermediate 112 --vocab 1024 --repeats 1
else
  bench_mst_row cpu_bench "d = 256, I = 896, V = 8192" --seq-lens 1024,2048,4096,8192 --chunks 1,2,4,8,16,32 \
    --hidden 256 --intermediate 896 --vocab 8192 --repeats 3
fi
analyse
