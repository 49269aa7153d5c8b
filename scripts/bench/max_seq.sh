#!/usr/bin/env bash
# The longest sequence each technique stack fits into a fixed per-rank device
# budget, predicted by `minilst plan --max-seq-len` (what a planned run holds, its
# step arena included, within the budget less the plan's default reserve: a
# sixteenth of --budget-mib) and confirmed by a real run (one step at the S found:
# it runs, within that budget; S + 1 is predicted not to fit), at CPU scale; then
# the same stack predicted for the Llama-3-8B shape on H100 80GB devices with 1, 8
# and 64 ranks, beside the seed papers' numbers.
# Writes runs/bench/max_seq_<UTC time>/ (a metrics file per confirming run,
# max_seq.h5, max_seq.png) and prints both tables.
#   scripts/bench/max_seq.sh [--budget-mib 128] [--no-runs]
# Deck: inputs/max_seq_cpu.yaml (4 layers, d = 128). The Llama table counts
# everything a rank holds, model states included, against whole devices as the
# papers do: an H100 80GB's memory (`--device h100-80gb`: 81,559 MiB less the
# default 4,096 MiB reserve) and 240 GiB of host memory per rank, bf16 (the
# deck's precision, as the papers train), the optimizer states offloaded to the host
# (ALST's setting) and the model states sharded over the ranks (ZeRO stage 2 on one
# device, stage 3 on 8 and 64, as ALST runs ZeRO-3 across its Ulysses group).
# MINILST=path/to/minilst skips the set-up and the build; OUT=dir names the output directory.
source "$(dirname "$0")/common.sh"
budget=128 runs=1
while (($#)); do
  case $1 in
    --budget-mib) budget=$2; shift 2 ;;
    --no-runs) runs=0; shift ;;
    *) echo "max_seq.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
bench_dir max_seq
deck="$root/inputs/max_seq_cpu.yaml"

# name | ranks | settings
stacks=(
  "vanilla|1|--set memory.policy=vanilla"
  "checkpoint|1|--set memory.policy=checkpoint --set mst.mlp_chunks=1 --set mst.lm_head_chunks=1"
  "+ chunked LM head|1|--set memory.policy=checkpoint --set mst.mlp_chunks=1"
  "+ chunked MLP|1|--set memory.policy=checkpoint"
  "+ offload|1|--set memory.policy=checkpoint_offload"
  "+ 2 ranks (ring)|2|--set memory.policy=checkpoint_offload --set parallel.ring=2"
  "+ 4 ranks (ring)|4|--set memory.policy=checkpoint_offload --set parallel.ring=4"
  "+ 4 ranks (2 ulysses x 2 ring)|4|--set memory.policy=checkpoint_offload --set parallel.ulysses=2 --set parallel.ring=2"
)
: > "$out/cpu.txt"
i=0
for row in "${stacks[@]}"; do
  IFS='|' read -r name ranks settings <<< "$row"
  read -r -a set <<< "$settings"
  "$minilst" plan "$deck" "${set[@]}" --ranks "$ranks" --device-mib "$budget" --max-seq-len --format json > "$out/plan_$i.json"
  S=$("$py" -c "import json; print(json.load(open('$out/plan_$i.json'))['seq_len'])")
  "$minilst" plan "$deck" "${set[@]}" --ranks "$ranks" --device-mib "$budget" --set run.seq_len=$((S + 1)) \
    --format json > "$out/next_$i.json"
  status="predicted"
  if ((runs)); then
    "${launch[@]}" "$ranks" "$minilst" run "$deck" "${set[@]}" --set run.seq_len="$S" --set output.metrics="$out/run_$i.h5" \
      > "$out/run_$i.log" 2>&1 || { tail -20 "$out/run_$i.log"; exit 1; }
    status="ran"
  fi
  printf '%s|%s|%s|%s\n' "$i" "$name" "$ranks" "$status" >> "$out/cpu.txt"
  echo "$name: S = $S on $ranks rank(s) ($status)"
  i=$((i + 1))
done

# Llama-3-8B on H100 80GB devices (the preset, less the default reserve): predictions only.
l8="$root/inputs/llama3_8b.yaml"
one="--set parallel.ulysses=1 --set parallel.zero=2 --set memory.optimizer_offload=true"  # one device
llama=(
  "vanilla|1|--set memory.policy=vanilla $one"
  "hf_checkpoint (the papers' recomputation)|1|--set memory.policy=hf_checkpoint $one"
  "checkpoint|1|--set memory.policy=checkpoint --set mst.mlp_chunks=1 --set mst.lm_head_chunks=1 $one"
  "+ chunked LM head and MLP|1|--set memory.policy=checkpoint $one"
  "+ offload|1|--set memory.policy=checkpoint_offload $one"
  "+ 8 ranks (ulysses, ZeRO-3)|8|"
  "+ 64 ranks (8 ulysses x 8 ring, ZeRO-3)|64|--set parallel.ring=8"
)
: > "$out/llama.txt"
j=0
for row in "${llama[@]}"; do
  IFS='|' read -r name ranks settings <<< "$row"
  read -r -a set <<< "$settings"
  "$minilst" plan "$l8" "${set[@]}" --ranks "$ranks" --device h100-80gb --host-mib 245760 --max-seq-len \
    --format json > "$out/llama_$j.json"
  printf '%s|%s|%s\n' "$j" "$name" "$ranks" >> "$out/llama.txt"
  j=$((j + 1))
done
"$py" "$root/analysis/max_seq.py" "$out" --budget-mib "$budget"
