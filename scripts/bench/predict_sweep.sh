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
#   scripts/bench/predict_sweep.sh [--steps 6] [--rounds 3] [--only REGEX] [--probe-once [--probe-ranks 2]] [--reprobe]
# --rounds R: every configuration runs R times, round-robin (round r's metrics in rR/), and each
# is measured as the median of its rounds: a spell of the host lasting minutes then slows one
# round of a run, not the run's measurement (the table prints the rounds' spread). --reprobe:
# after the runs, probes the machine again the same way (*_end.yaml) and prints a second table,
# the same runs priced from those files (`minilst plan --machine`, end/NAME.json): where the two
# tables differ, the machine moved between the probes (a shared host), not the model.
# --only runs the configurations whose name matches (e.g. '^n1_'). --probe-once: one probe with
# the probe's defaults on 2 ranks prices every configuration of 1 and 2 ranks (decks it was not
# probed for: other head dims, policies, layouts; the 4-rank ones are left out); --probe-ranks 1:
# on one rank, pricing the 1-rank ones (a 1-rank file has no links for more). OPENBLAS_NUM_THREADS=1 per
# rank. MINILST=path/to/minilst skips the set-up and the build; OUT=dir names the output directory.
source "$(dirname "$0")/common.sh"
steps=6 rounds=3 only=. once=0 once_ranks=2 reprobe=0
while (($#)); do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --probe-once) once=1; shift ;;
    --probe-ranks) once_ranks=$2; shift 2 ;;
    --reprobe) reprobe=1; shift ;;
    *) echo "predict_sweep.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "predict_sweep.sh: --rounds must be a positive integer, not '$rounds'" >&2; exit 2; }
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

declare -A probed=()  # machine file -> "RANKS PROBE ARGUMENTS" of its probe
specs=() configs=()   # NAME=METRICS.h5 of every run (a name's rounds read as one); the configurations run

probe() {  # probe MACHINE RANKS [PROBE ARGUMENTS...]: minilst probe on RANKS ranks, its log beside the file
  local machine=$1 ranks=$2
  shift 2
  run_on "$ranks" "$minilst" probe --out "$machine" "$@" > "$machine.log" 2>&1 ||
    { tail -20 "$machine.log"; echo "predict_sweep.sh: probe of $ranks rank(s) $* failed" >&2; exit 1; }
}

machine_of() {  # machine_of RANKS HEAD_DIM: the machine file a configuration is priced from ("" : none)
  if ((once)); then
    (($1 <= once_ranks)) && echo "$out/probe_once.yaml"
  else
    echo "$out/probe_n$1_h$2.yaml"
  fi
  return 0
}

# config_sets MACHINE "SETTINGS...": the configuration's --set arguments into $sets_args: its
# settings and the kernels the probe timed for its precision (a run too short to measure its GEMM
# paths would take the established ones, kernel_choice.cpp, and the prediction would price other kernels)
config_sets() {
  local machine=$1 sets=$2 precision=float k s
  sets_args=()
  for s in $sets; do sets_args+=(--set "$s"); done
  [[ " $sets " =~ " run.precision=bf16 " ]] && precision=bf16
  for k in $(sed -n "s/^ *gemm_gflops.$precision: \"measured: through variant=[a-z]* \([^,]*\),.*/\1/p" "$machine"); do
    sets_args+=(--set "run.${k/attention=/attention_kernel=}")
  done
}

# run_config ROUND "NAME RANKS HEAD_DIM DECK SETTINGS...": probes the machine file the run is priced
# from where no run used it yet, runs the configuration into rROUND/, appends its spec to $specs
run_config() {
  local round=$1 name ranks hd deck sets machine metrics log
  read -r name ranks hd deck sets <<< "$2"
  machine=$(machine_of "$ranks" "$hd")
  [[ -n $machine ]] || return 0
  if [[ -z ${probed[$machine]:-} ]]; then
    if ((once)); then probed[$machine]=$once_ranks; else probed[$machine]="$ranks --head-dim $hd"; fi
    # shellcheck disable=SC2086  # the probe's ranks and arguments, split
    probe "$machine" ${probed[$machine]}
  fi
  ((round > 1)) || configs+=("$2")
  metrics=$out/r$round/$name.h5 log=$out/r$round/$name.log
  config_sets "$machine" "$sets"
  # a changed run.seq_len makes the deck's reference losses inapplicable: INVALID (exit 1) with every step timed
  run_on "$ranks" "$minilst" run "$in/$deck.yaml" --machine "$machine" --set run.steps="$steps" --set run.warmup_steps=1 \
    --set output.metrics="$metrics" "${sets_args[@]}" > "$log" 2>&1 || grep -q '^RESULT: INVALID' "$log" ||
    { tail -20 "$log"; echo "predict_sweep.sh: run $name (round $round) failed" >&2; exit 1; }
  grep -h '^ *predicted step' "$log" | sed "s/^ */$name (round $round): /" || true
  specs+=("$name=$metrics")
}

# reprobe_specs: every machine file probed again (*_end.yaml), each configuration planned on its
# file's second probe (end/NAME.json); the NAME=PLAN.json,METRICS.h5 specs of every round into $end_specs
reprobe_specs() {
  local machine line name ranks hd deck sets end round
  mkdir -p "$out/end"
  for machine in "${!probed[@]}"; do
    # shellcheck disable=SC2086
    probe "${machine%.yaml}_end.yaml" ${probed[$machine]}
  done
  end_specs=()
  for line in "${configs[@]}"; do
    read -r name ranks hd deck sets <<< "$line"
    machine=$(machine_of "$ranks" "$hd") end=${machine%.yaml}_end.yaml
    config_sets "$end" "$sets"
    "$minilst" plan "$in/$deck.yaml" --ranks "$ranks" --machine "$end" --format json "${sets_args[@]}" \
      > "$out/end/$name.json" 2> "$out/end/$name.err" ||
      { cat "$out/end/$name.err"; echo "predict_sweep.sh: plan $name on $end failed" >&2; exit 1; }
    for ((round = 1; round <= rounds; round++)); do end_specs+=("$name=$out/end/$name.json,$out/r$round/$name.h5"); done
  done
}

for ((round = 1; round <= rounds; round++)); do
  mkdir -p "$out/r$round"
  for line in "${runs[@]}"; do
    if [[ ${line%% *} =~ $only ]]; then run_config "$round" "$line"; fi
  done
done
((${#specs[@]})) || { echo "predict_sweep.sh: no configuration to run: none matches --only '$only'$( ((once)) && echo " among those of at most $once_ranks rank(s)")" >&2; exit 2; }
"$py" "$root/analysis/predicted_vs_measured.py" "${specs[@]}" --png "$out/predicted_vs_measured.png"
if ((reprobe)); then
  reprobe_specs
  echo "The same runs priced by the machine probed again after them (the machine's own drift between the probes):"
  "$py" "$root/analysis/predicted_vs_measured.py" "${end_specs[@]}" --png "$out/predicted_vs_measured_end.png"
fi
echo "predict_sweep.sh: wrote $out"
