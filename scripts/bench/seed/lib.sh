# shellcheck shell=bash
# Sourced by the seed-paper table scripts (scripts/bench/seed/<paper>_table<N>.sh).
# Reads the common options, then sources ../common.sh (strict mode, $root,
# $minilst, $bin, $py, the run-time environment; MINILST=path/to/minilst skips the
# set-up and the build), and sets:
#   --tiny    $tiny = 1: the seconds-long variant the CI smoke test runs
#             (default 0: the CPU-scale study, a few minutes at most)
#   $out      OUT=dir, or runs/bench/<script>_<UTC time>_<job>_<pid>/ (runs/: RUNS_DIR,
#             the checkout's, or ./runs in an installed tree: scripts/lib/minilst_program.sh)
#   $launch   the MPI launcher (LAUNCH, default scripts/env.sh's MINILST_LAUNCH)
# Every row a script plans or runs is recorded in $out/rows.txt as
#   name|kind|ranks|label|detail
# (kind: plan, run, bench, skipped; detail: why a row was skipped or refused),
# and its result is $out/<name>.json (plan) or $out/<name>.h5 (a metrics file, or
# minilst_bench_mst's), so the analysis (analysis/seed/<script>.py) finds each
# row by name.
seed=$(basename "$0" .sh)
tiny=0
while (($#)); do  # before common.sh, so that --help and a bad argument never set up or build anything
  case $1 in
    --tiny) tiny=1; shift ;;
    -h | --help) sed -n '2,/^source/{/^source/d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;;
    *) echo "$seed.sh: unknown argument '$1' (options: --tiny)" >&2; exit 2 ;;
  esac
done
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
out=${OUT:-$(unique_dir "$(minilst_runs_dir "$root")/bench" "$seed")}
mkdir -p "$out"
read -r -a launch <<< "${LAUNCH:-$MINILST_LAUNCH}"
: > "$out/rows.txt"
minilst_keys=$("$minilst" keys)

has_choice() {  # has_choice KEY VALUE: this build's deck accepts KEY = VALUE (a choice key)
  grep -E "^ *$1 " <<< "$minilst_keys" | grep -q -E "[(|]$2[|)]"
}
has_key() {  # has_key KEY: this build knows the deck key
  grep -q -E "^ *$1 " <<< "$minilst_keys"
}

record() {  # record NAME KIND RANKS LABEL [DETAIL]
  printf '%s|%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" "${5:-}" >> "$out/rows.txt"
}

skip_row() {  # skip_row NAME RANKS LABEL WHY: a row this build cannot run, kept in the table with the reason
  record "$1" skipped "$2" "$3" "$4"
  echo "$1: skipped ($4)"
}

plan_row() {  # plan_row NAME RANKS LABEL DECK [plan arguments...]: minilst plan ... --format json > NAME.json
  local name=$1 ranks=$2 label=$3 deck=$4 err
  shift 4
  if "$minilst" plan "$deck" --ranks "$ranks" "$@" --format json > "$out/$name.json" 2> "$out/$name.err"; then
    [[ -s $out/$name.err ]] || rm -f "$out/$name.err"
    record "$name" plan "$ranks" "$label"
    echo "$name: S = $(json_field "$name" seq_len) ($label, predicted)"
  else
    err=$(tr '\n' ' ' < "$out/$name.err")
    rm -f "$out/$name.json"
    record "$name" skipped "$ranks" "$label" "refused by minilst plan: ${err%% }"
    echo "$name: refused by minilst plan: $err"
  fi
}

run_row() {  # run_row NAME RANKS LABEL DECK [--set ...]: a real run, metrics in NAME.h5, output in NAME.log
  # (another S or shape than the deck's: its reference losses are dropped; one rank runs without a launcher)
  local name=$1 ranks=$2 label=$3 deck=$4 cmd=("$minilst")
  shift 4
  ((ranks == 1)) || cmd=("${launch[@]}" "$ranks" "$minilst")
  if ! "${cmd[@]}" run "$deck" "$@" --set reference.losses= --set output.metrics="$out/$name.h5" \
    --set output.overwrite=true > "$out/$name.log" 2>&1; then
    echo "$name: the run failed ($label); the end of $out/$name.log:" >&2
    tail -20 "$out/$name.log" >&2
    exit 1
  fi
  record "$name" run "$ranks" "$label"
  echo "$name: $(grep '^RESULT' "$out/$name.log" | cut -c1-100) ($label)"
}

# Device budgets: `minilst plan --device PRESET --reserve-mib MIB`, a device's memory as its driver
# reports it (`minilst plan --device list`: the H100 80GB offers 81,559 MiB, the A100 80GB 81,920)
# less a runtime reserve for the CUDA context, NCCL's buffers and the allocator. ALST ran on H100s,
# MsT on A100s, MEMO on A800s (an A100's 80 GB).
reserve_mib=4096  # minilst plan's default reserve on these devices, given explicitly

device_args() {  # device_args PRESET: the plan arguments of one such device per rank, less the reserve
  echo "--device $1 --reserve-mib $reserve_mib"
}

device_fit_mib() {  # device_fit_mib PRESET: the MiB a run may use there: the preset's memory less the reserve
  "$minilst" plan --device list --format json | "$py" -c "import json, sys
devices = {d['name']: d for d in json.load(sys.stdin)['devices']}
print(int(devices[sys.argv[1]]['capacity_mib'] - float(sys.argv[2])))" "$1" "$reserve_mib"
}

keep() {  # keep NAME VALUE: a figure the analysis reads back (NAME.txt in the output directory)
  echo "$2" > "$out/$1.txt"
}

params_of() {  # params_of DECK [--set ...]: the deck's parameter count (its bf16 weight copy's bytes / 2)
  local deck=$1
  shift
  "$minilst" plan "$deck" --ranks 1 "$@" --set parallel.ulysses=1 --set parallel.ring=1 --set parallel.zero=0 \
    --set memory.optimizer_offload=false --set run.precision=bf16 --format json |
    "$py" -c "import json, sys; print(json.load(sys.stdin)['memory_bytes']['weights'] // 2)"
}

budget_after_states() {  # budget_after_states PRESET PARAMS BYTES_PER_PARAM: the MiB of device_fit_mib PRESET
  # left for activations once each parameter holds that many bytes of model state on the device
  awk -v p="$2" -v b="$3" -v fit="$(device_fit_mib "$1")" 'BEGIN { printf "%.2f", fit - p * b / 1048576 }'
}

json_field() {  # json_field NAME KEY: a top-level field of NAME.json
  "$py" -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$out/$1.json" "$2"
}

analyse() {  # runs analysis/seed/<script>.py on $out: table.md, <script>.h5, <script>.png, the table printed
  local args=("$out")
  ((tiny)) && args+=(--tiny)
  PYTHONDONTWRITEBYTECODE=1 "$py" "$root/analysis/seed/$seed.py" "${args[@]}"  # no __pycache__ in the tree
}

bench_mst_row() {  # bench_mst_row NAME LABEL [minilst_bench_mst options]: the MLP block and the LM head alone
  # (time and workspace against the chunk count M) into NAME.h5, output in NAME.log
  local name=$1 label=$2
  shift 2
  if ! "$bin/minilst_bench_mst" "$@" --output "$out/$name.h5" > "$out/$name.log" 2>&1; then
    echo "$name: minilst_bench_mst failed; the end of $out/$name.log:" >&2
    tail -20 "$out/$name.log" >&2
    exit 1
  fi
  record "$name" bench 1 "$label"
  echo "$name: $label ($(grep -c -E '^ *[0-9]+ +[0-9]+ \|' "$out/$name.log") points)"
}

bench_mst_sweep() {  # bench_mst_sweep: MsT Tables 12-15's CPU sweep of both blocks into cpu_bench.h5 (--tiny: small)
  if ((tiny)); then
    bench_mst_row cpu_bench "d = 32, I = 112, V = 1024" --seq-lens 256,1024 --chunks 1,2,4 --hidden 32 \
      --intermediate 112 --vocab 1024 --repeats 1
  else
    bench_mst_row cpu_bench "d = 256, I = 896, V = 8192" --seq-lens 1024,2048,4096,8192 --chunks 1,2,4,8,16,32 \
      --hidden 256 --intermediate 896 --vocab 8192 --repeats 3
  fi
}

policy_of() {  # policy_of SETTINGS: the memory.policy they set
  local p=${1#*memory.policy=}
  echo "${p%% *}"
}

block_plan_rows() {  # block_plan_rows BLOCK "S..." "M...": Llama-3-8B's one-layer deck predicted at each S and
  # chunk count M of BLOCK (mlp or lm_head), the other block cut into single-token chunks (at most 16384) so
  # that the swept block's transient memory is what the step's workspace high-water shows; gpu_s<S>_m<M>.json
  local block=$1 S M other sets
  for S in $2; do
    for M in $3; do
      other=$((S < 16384 ? S : 16384))
      if [[ $block == mlp ]]; then
        sets=(--set mst.mlp_chunks="$M" --set mst.lm_head_chunks="$other")
      else
        sets=(--set mst.lm_head_chunks="$M" --set mst.mlp_chunks="$other")
      fi
      plan_row "gpu_s${S}_m$M" 1 "$block, S = $S, M = $M" "$root/inputs/llama3_8b_layer.yaml" \
        --set run.seq_len="$S" "${sets[@]}" > /dev/null
    done
    # The LM head as the paper's standard implementation has it (Hugging Face's: whole bf16 logits,
    # their fp32 upcast and its gradient), not miniLST's fused head at M = 1: gpu_s<S>_hf.json
    [[ $block == lm_head ]] && plan_row "gpu_s${S}_hf" 1 "lm_head, S = $S, Hugging Face head" \
      "$root/inputs/llama3_8b_layer.yaml" --set run.seq_len="$S" --set memory.policy=hf_checkpoint > /dev/null
  done
  return 0
}

half_swap_gbs() {  # half_swap_gbs METRICS.h5: the link bandwidth (GB/s) at which one layer's forward time, as
  # that offload run measured it, moves the layer's x, o and half of the rest: alpha = 1 cannot hide there
  "$py" - "$1" <<'PY'
import sys, h5py
a = h5py.File(sys.argv[1], "r").attrs
bytes_ = a["offload_layer_bytes_x"] + a["offload_layer_bytes_o"] + 0.5 * a["offload_layer_bytes_rest"]
print(f"{bytes_ / a['offload_layer_forward_s'] / 1e9:.6g}")
PY
}
