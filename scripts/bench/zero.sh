#!/usr/bin/env bash
# ZeRO stages against replicated model states, in one run on one machine: the
# scaling deck (inputs/scaling_cpu.yaml; or --deck) on --np ranks (default 2, as
# 2 Ulysses ranks), parallel.zero = 0, 1, 2, 3, each with and without optimizer
# offload, alternating, --rounds times. Per configuration: the measured step time
# and its ratio to stage 0's (the acceptance: stage 3 <= 1.15 x stage 0, the
# gathers hidden behind compute), the exposed and background (overlap window) time
# of the gradient reductions and weight gathers, AdamW, the per-rank model-state
# bytes (measured = model) and the bytes sent per operation.
# Writes runs/bench/zero_<UTC time>/ (every metrics file and log, zero.h5, zero.png)
# and prints the table (analysis/zero_bench.py).
#   scripts/bench/zero.sh [--rounds 3] [--np 2] [--deck DECK] [--set key=value ...]
# Default --set: parallel.ulysses=2 (sequence parallel over both ranks; add
# --set parallel.ulysses=1 for pure data parallelism). OPENBLAS_NUM_THREADS=1 per
# rank; OpenBLAS's own kernel choice for this CPU (an environment that sets
# OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE: run it as
#   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE scripts/bench/zero.sh).
# MINILST=path/to/minilst skips the set-up and the build; OUT=dir names the output directory.
source "$(dirname "$0")/common.sh"
bench_options zero.sh "$@"
((${#sets[@]})) || sets=(--set parallel.ulysses=2)
bench_dir zero
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
for r in $(seq 1 "$rounds"); do
  for stage in 0 1 2 3; do
    for off in false true; do
      name="zero${stage}_offload_${off}_r$r"
      "${launch[@]}" "$np" "$minilst" run "$deck" "${sets[@]}" --set parallel.zero="$stage" \
        --set memory.optimizer_offload="$off" --set output.metrics="$out/$name.h5" > "$out/$name.log" 2>&1 ||
        { tail -20 "$out/$name.log"; echo "zero.sh: run $name failed" >&2; exit 1; }
      grep '^RESULT' "$out/$name.log" | sed "s/^/$name: /"
    done
  done
done
"$py" "$root/analysis/zero_bench.py" "$out"
