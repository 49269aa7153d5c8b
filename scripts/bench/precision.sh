#!/usr/bin/env bash
# bf16 mixed precision against fp32, in one run on one machine:
#   speed     the step deck (default inputs/step_cpu.yaml: one layer, d = 1024,
#             S = 2048, V = 32000) in float and in bf16, alternating, --rounds times,
#             one rank; the bf16 step over the fp32 step, per phase
#   GEMM      minilst_bench_kernels bf16gemm at the LM head's three shapes: the bf16
#             GEMM the run chose (AVX512_BF16 dot products or fp32 tiles) over SGEMM
#   learning  inputs/default.yaml for --steps steps (default 300) in float and in
#             bf16 on its 2 ranks (zigzag ring): the synthetic task is learnable
#             (3 tokens in 4 follow a fixed successor), so both loss curves fall; the
#             final bf16 loss (mean of the last 10 steps) against fp32's
# Writes runs/bench/precision_<UTC time>/ (every metrics file and log, gemm_*.json,
# precision.h5, precision.png) and prints the table (analysis/precision_bench.py).
#   scripts/bench/precision.sh [--rounds 2] [--steps 300] [--step-deck DECK] [--no-curve]
# OPENBLAS_NUM_THREADS=1 per rank. OpenBLAS's own kernel choice for this CPU (an
# environment that sets OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE: run it as
#   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE scripts/bench/precision.sh). MINILST_BIN_DIR=dir skips the set-up and the build;
# OUT=dir names the output directory.
source "$(dirname "$0")/common.sh"
rounds=2 steps=300 step_deck="$root/inputs/step_cpu.yaml" curve=1
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --step-deck) step_deck=$(realpath "$2"); shift 2 ;;
    --no-curve) curve=0; shift ;;
    *) echo "precision.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
bench_dir precision
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

run() {  # run NAME RANKS DECK [--set ...]: one run, its metrics file and log in $out
  local name=$1 ranks=$2 deck=$3
  shift 3
  "${launch[@]}" "$ranks" "$minilst" run "$deck" "$@" --set output.metrics="$out/$name.h5" > "$out/$name.log" 2>&1 ||
    { tail -20 "$out/$name.log"; echo "precision.sh: run $name failed" >&2; exit 1; }
  grep '^RESULT' "$out/$name.log" | sed "s/^/$name: /"
}

for r in $(seq 1 "$rounds"); do
  for p in float bf16; do
    run "step_${p}_r$r" 1 "$step_deck" --set run.precision="$p" --set run.steps=3 --set run.warmup_steps=1
  done
done
read -r d V <<< "$("$py" -c "import yaml; m = yaml.safe_load(open('$step_deck'))['model']; print(m['hidden'], m['vocab'])")"
S=$("$py" -c "import yaml; print(yaml.safe_load(open('$step_deck'))['run']['seq_len'])")
i=0
for shape in "--m $S --n $V --k $d" "--m $d --n $V --k $S --ta" "--m $S --n $d --k $V --tb"; do
  read -r -a args <<< "$shape"
  "$bin/minilst_bench_kernels" bf16gemm "${args[@]}" --repeats 2 > "$out/gemm_$i.json"
  i=$((i + 1))
done
if ((curve)); then
  for p in float bf16; do
    run "curve_$p" 2 "$root/inputs/default.yaml" --set run.precision="$p" --set run.steps="$steps" \
      --set run.warmup_steps=2 --set reference.losses=
  done
fi
"$py" "$root/analysis/precision_bench.py" "$out"
