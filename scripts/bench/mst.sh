#!/usr/bin/env bash
# Mini-sequence benchmark: the MLP block and the LM head + loss alone, time and
# workspace against the chunk count M for several sequence lengths (the CPU
# counterpart of MsT's Tables 12-15). Builds if needed, writes
# runs/bench/mst_<UTC time>_<job>_<pid>/mst.h5 and a PNG beside it, prints the overhead table.
#   scripts/bench/mst.sh [minilst_bench_mst options, e.g. --seq-lens 2048,8192 --vocab 32000]
# Defaults: S = 1024..8192, M = 1..32, d = 256, I = 688, V = 8192, float, 3 repeats
# (about 2 minutes on one core). On a cluster node, change the shapes to your model's.
source "$(dirname "$0")/common.sh"
out="$(unique_dir "$root/runs/bench" mst)/mst.h5"
"$bin/minilst_bench_mst" --output "$out" "$@"
"$py" "$root/analysis/plot_mst_bench.py" "$out"
