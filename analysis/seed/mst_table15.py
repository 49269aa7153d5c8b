#!/usr/bin/env python3
"""MsT Table 15: the MLP block's memory against the mini-sequence count M, beside
miniLST's (minilst_bench_mst at CPU scale; Llama-3-8B predicted by minilst plan).
The paper's cells: seed_papers.MST_TABLE15.

    /usr/bin/python3 analysis/seed/mst_table15.py DIR [--tiny]     (DIR: scripts/bench/seed/mst_table15.sh's output)
"""
import mst_blocks

if __name__ == "__main__":
    mst_blocks.table("mst_table15", "mlp", "memory", __doc__)
