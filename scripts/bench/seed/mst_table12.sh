#!/usr/bin/env bash
# MsT (arXiv 2407.15892) Table 12: the execution time of the LM head + loss (forward +
# backward) against the mini-sequence count M (standard = 1, then 2 to 32) for
# S = 1K to 80K on Llama-3-8B: chunks cost time only where they are short.
#   CPU scale: minilst_bench_mst, the block alone at Llama-3's ratios (d = 256,
#   I = 896 = 3.5 d, V = 8192 = 32 d), float, S = 1024 to 8192, M = 1 to 32, median
#   of 3 repeats (it times both blocks; this table reads lm head). About a minute.
#   --tiny: S = 256 and 1024, M = 1, 2, 4, d = 32.
#   Paper scale: not predicted (time needs the hardware); the table compares the
#   paper's time over its standard block with miniLST's at the same S and M.
#   scripts/bench/seed/mst_table12.sh [--tiny]
source "$(dirname "$0")/lib.sh"

bench_mst_sweep
analyse
