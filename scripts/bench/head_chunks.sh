#!/usr/bin/env bash
# Head-chunked Ulysses against Ulysses over every head, in one run on one machine: the
# scaling deck (inputs/scaling_cpu.yaml; or --deck) reshaped to 16 query heads and 2 kv
# heads (head dim 32, S = 4096, 8 steps) on --np ranks (default 2: 8 query heads and one shared
# kv head per member), memory.policy checkpoint, parallel.ulysses_head_chunks = 1, 2, 4, 8,
# alternating, --rounds times. Per count: the measured step time and its ratio to N = 1
# (the acceptance: N = 4 within 1.10 x), the all-to-all time left exposed, the device
# high-water and the comm category's (measured = model), and the all-to-all bytes (the
# same for every N).
# Writes runs/bench/head_chunks_<UTC time>/ (every metrics file and log, head_chunks.h5,
# head_chunks.png) and prints the table (analysis/head_chunks_bench.py).
#   scripts/bench/head_chunks.sh [--rounds 3] [--np 2] [--deck DECK] [--set key=value ...]
# OPENBLAS_NUM_THREADS=1 per rank; OpenBLAS's own kernel choice for this CPU (an environment
# that sets OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE: run it as
#   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE scripts/bench/head_chunks.sh).
# MINILST=path/to/minilst skips the set-up and the build; OUT=dir names the output directory.
source "$(dirname "$0")/common.sh"
bench_options head_chunks.sh "$@"
# The MLP and the LM head in 8 mini-sequences each, so that the attention's backward holds the
# step's peak (as at Llama-3-8B's scale); no reference losses (the deck's are for its own shape).
shape=(--set model.hidden=512 --set model.heads=16 --set model.kv_heads=2 --set run.seq_len=4096
       --set run.steps=8 --set memory.policy=checkpoint --set mst.mlp_chunks=8 --set mst.lm_head_chunks=8
       --set parallel.ulysses="$np" --set reference.losses=)
bench_dir head_chunks
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
for r in $(seq 1 "$rounds"); do
  for n in 1 2 4 8; do
    name="chunks${n}_r$r"
    "${launch[@]}" "$np" "$minilst" run "$deck" "${shape[@]}" "${sets[@]}" --set parallel.ulysses_head_chunks="$n" \
      --set output.metrics="$out/$name.h5" > "$out/$name.log" 2>&1 ||
      { tail -20 "$out/$name.log"; echo "head_chunks.sh: run $name failed" >&2; exit 1; }
    grep '^RESULT' "$out/$name.log" | sed "s/^/$name: /"
  done
done
"$py" "$root/analysis/head_chunks_bench.py" "$out"
