#!/usr/bin/env python3
"""MsT Table 14: the MLP block's time against the mini-sequence count M, beside
miniLST's (minilst_bench_mst at CPU scale).
The paper's cells: seed_papers.MST_TABLE14.

    /usr/bin/python3 analysis/seed/mst_table14.py DIR [--tiny]     (DIR: scripts/bench/seed/mst_table14.sh's output)
"""
import mst_blocks

if __name__ == "__main__":
    mst_blocks.table("mst_table14", "mlp", "time", __doc__)
