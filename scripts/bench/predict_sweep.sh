#!/usr/bin/env bash
# The time model against this machine: probes it on 1, 2 and 4 ranks (at head dims 32 and
# 64, those of the shipped CPU decks), then runs 25 configurations of the shipped CPU decks
# (1, 2, 4 ranks; Ulysses, ring zigzag and contiguous, hybrid, data parallel, tensor parallel; full,
# checkpoint and offload; float and bf16), each with `--machine` (the probe of its rank
# count and head dim), so every metrics file holds its prediction beside its measurement.
# Prints the table (analysis/predicted_vs_measured.py: each run's step error and each
# phase's, and the share within 15%) and writes runs/bench/predict_<UTC time>/ (machine
# files, metrics, logs, predicted_vs_measured.png). Each run uses the attention kernel and GEMM
# paths its probe timed (the provenance of gemm_gflops.<precision>).
#   scripts/bench/predict_sweep.sh [--steps 6] [--only REGEX] [--probe-once [--probe-ranks 2]]
# --only runs the configurations whose name matches (e.g. '^n1_'). --probe-once: one probe with
# the probe's defaults on 2 ranks prices every configuration of 1 and 2 ranks (decks it was not
# probed for: other head dims, policies, layouts; the 4-rank ones are left out); --probe-ranks 1:
# on one rank, pricing the 1-rank ones (a 1-rank file has no links for more). OPENBLAS_NUM_THREADS=1 per
# rank. MINILST=path/to/minilst skips the set-up and the build; OUT=dir names the output directory.
source "$(dirname "$0")/common.sh"
steps=6 only=. once=0 once_ranks=2
while (($#)); do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --probe-once) once=1; shift ;;
    --probe-ranks) once_ranks=$2; shift 2 ;;
    *) echo "predict_sweep.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $once_ranks =~ ^[12]$ ]] || { echo "predict_sweep.sh: --probe-ranks must be 1 or 2, not '$once_ranks'" >&2; exit 2; }
bench_dir predict
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
in=$root/inputs

# name ranks head_dim deck settings...
runs=(
  "n1_scal_f 1 32 scaling_cpu"
  "n1_scal_b 1 32 scaling_cpu run.precision=bf16"
  "n1_scal_ck 1 32 scaling_cpu memory.policy=checkpoint"
  "n1_step_f 1 64 step_cpu run.seq_len=1024"
  "n1_step_b 1 64 step_cpu run.seq_len=1024 run.precision=bf16"
  "n1_off 1 64 offload_cpu"
  "n1_long_ck 1 32 long_context_cpu run.seq_len=4096"
  "n2_scal_dp 2 32 scaling_cpu"
  "n2_scal_u2 2 32 scaling_cpu parallel.ulysses=2"
  "n2_scal_rz 2 32 scaling_cpu parallel.ring=2"
  "n2_scal_rc 2 32 scaling_cpu parallel.ring=2 parallel.ring_layout=contiguous"
  "n2_scal_rz_ckb 2 32 scaling_cpu parallel.ring=2 memory.policy=checkpoint run.precision=bf16"
  "n2_step_u2_b 2 64 step_cpu run.seq_len=1024 parallel.ulysses=2 run.precision=bf16"
  "n2_off_u2 2 64 offload_cpu parallel.ulysses=2"
  "n2_long_rz_ck 2 32 long_context_cpu run.seq_len=4096 parallel.ring=2"
  "n2_scal_t2 2 32 scaling_cpu parallel.tensor=2"
  "n2_step_t2_b 2 64 step_cpu run.seq_len=1024 parallel.tensor=2 run.precision=bf16"
  "n4_scal_u4 4 32 scaling_cpu parallel.ulysses=4"
  "n4_scal_rz 4 32 scaling_cpu parallel.ring=4"
  "n4_scal_rc_b 4 32 scaling_cpu parallel.ring=4 parallel.ring_layout=contiguous run.precision=bf16"
  "n4_scal_h22 4 32 scaling_cpu parallel.ulysses=2 parallel.ring=2"
  "n4_off_r4 4 64 offload_cpu parallel.ring=4"
  "n4_long_h22_ck 4 32 long_context_cpu run.seq_len=4096 parallel.ulysses=2 parallel.ring=2"
  "n4_scal_t2u2 4 32 scaling_cpu parallel.tensor=2 parallel.ulysses=2"
  "n4_scal_t2rz_ck 4 32 scaling_cpu parallel.tensor=2 parallel.ring=2 memory.policy=checkpoint"
)

run_on() {  # run_on RANKS CMD...: one rank directly, more through the launcher
  local n=$1
  shift
  if ((n == 1)); then "$@"; else "${launch[@]}" "$n" "$@"; fi
}

declare -A probed=()
for line in "${runs[@]}"; do
  read -r name ranks hd deck sets <<< "$line"
  [[ $name =~ $only ]] || continue
  machine=$out/probe_n${ranks}_h$hd.yaml probe_ranks=$ranks probe_args=(--head-dim "$hd")
  if ((once)); then
    ((ranks <= once_ranks)) || continue
    machine=$out/probe_once.yaml probe_ranks=$once_ranks probe_args=()
  fi
  if [[ -z ${probed[$machine]:-} ]]; then
    run_on "$probe_ranks" "$minilst" probe --out "$machine" "${probe_args[@]}" > "$machine.log" 2>&1 ||
      { tail -20 "$machine.log"; echo "predict_sweep.sh: probe of $probe_ranks rank(s) ${probe_args[*]} failed" >&2; exit 1; }
    probed[$machine]=1
  fi
  args=(--machine "$machine" --set run.steps="$steps" --set run.warmup_steps=1 --set output.metrics="$out/$name.h5")
  for s in $sets; do args+=(--set "$s"); done
  # the kernels the probe timed for the run's precision: a run too short to measure its GEMM paths
  # would take the established ones (kernel_choice.cpp), and the prediction would price other kernels
  precision=float
  [[ " $sets " =~ " run.precision=bf16 " ]] && precision=bf16
  for k in $(sed -n "s/^ *gemm_gflops.$precision: \"measured: through variant=[a-z]* \([^,]*\),.*/\1/p" "$machine"); do
    args+=(--set "run.${k/attention=/attention_kernel=}")
  done
  # a changed run.seq_len makes the deck's reference losses inapplicable: INVALID (exit 1) with every step timed
  run_on "$ranks" "$minilst" run "$in/$deck.yaml" "${args[@]}" > "$out/$name.log" 2>&1 || grep -q '^RESULT: INVALID' "$out/$name.log" ||
    { tail -20 "$out/$name.log"; echo "predict_sweep.sh: run $name failed" >&2; exit 1; }
  grep -h '^ *predicted step' "$out/$name.log" | sed "s/^ */$name: /" || true
done
"$py" "$root/analysis/predicted_vs_measured.py" "$out"/*.h5 --png "$out/predicted_vs_measured.png"
echo "predict_sweep.sh: wrote $out"
