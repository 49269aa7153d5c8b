"""MsT Table 12: the time of the LM head + loss against the mini-sequence count M, beside miniLST's
(minilst_bench_mst at CPU scale).

    /usr/bin/python3 analysis/seed/mst_table12.py DIR [--tiny]     (DIR: scripts/bench/seed/mst_table12.sh's output)
"""
import mst_blocks

# MsT, arXiv 2407.15892, Table 12 (seconds per S of mst_blocks.PAPER_S, Llama-3-8B, one A100; M = 1 is
# "standard"): the cells were not available (None: n/a); the layout is the paper's.
PAPER = {m: [None] * len(mst_blocks.PAPER_S) for m in (1, 2, 4, 8, 16, 32)}

if __name__ == "__main__":
    mst_blocks.table("mst_table12", 12, "lm_head", "time", PAPER, __doc__)
