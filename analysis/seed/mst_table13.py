#!/usr/bin/env python3
"""MsT Table 13: the LM head + loss's memory against the mini-sequence count M, beside
miniLST's (minilst_bench_mst at CPU scale; Llama-3-8B predicted by minilst plan).
The paper's cells: seed_papers.MST_TABLE13.

    /usr/bin/python3 analysis/seed/mst_table13.py DIR [--tiny]     (DIR: scripts/bench/seed/mst_table13.sh's output)
"""
import mst_blocks

if __name__ == "__main__":
    mst_blocks.table("mst_table13", "lm_head", "memory", __doc__)
