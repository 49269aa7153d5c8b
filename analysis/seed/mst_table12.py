#!/usr/bin/env python3
"""MsT Table 12: the LM head + loss's time against the mini-sequence count M, beside
miniLST's (minilst_bench_mst at CPU scale).
The paper's cells: seed_papers.MST_TABLE12.

    /usr/bin/python3 analysis/seed/mst_table12.py DIR [--tiny]     (DIR: scripts/bench/seed/mst_table12.sh's output)
"""
import mst_blocks

if __name__ == "__main__":
    mst_blocks.table("mst_table12", "lm_head", "time", __doc__)
