#!/usr/bin/env bash
# The device check: one command, run from the repository root on a GPU node, that
# runs every GPU part of miniLST under a time budget and writes what it found into
# OUTDIR. Each part is time-boxed; a part that fails or runs out of time is
# recorded as such and the others still run; the summary is rewritten after every
# part, so what finished is kept whatever stops the check.
#
#   scripts/gpu/check.sh OUTDIR [--dry-run] [--budget-s 480] [--bundle DIR]
#
# Parts, in order (GPU sizes; --dry-run: the same parts at tiny sizes on the host
# build in build/, PyTorch on the CPU, so that the script itself is tested here):
#   device       the GPU's name, driver, memory and clocks (nvidia-smi)
#   cuda_tests   the test programs built for CUDA: tensor-core attention against the
#                float64 reference kernel, the GEMMs (cuBLAS), the copy engine, the
#                model, planner and layouts on one GPU
#   layer_check  a one-layer bf16 step (inputs/gpu_layer_check.yaml) whose losses must
#                match the float64 losses the host computed for the same deck (the same
#                deck in the dry run: it is small)
#   attention    the attention kernel alone, forward + backward, bf16, head dim 128,
#                S = 4096 and 16384, against the cuBLAS bf16 GEMM rate of the same process
#   step         the one-layer Llama-3-8B step (inputs/llama3_8b_layer.yaml, S = 16384)
#                beside PyTorch's (SDPA, bf16 autocast, fused AdamW) on the same GPU;
#                MFU of both; device memory (tracked, and the driver's) against the plan
#   offload      MEMO's offload (alpha auto) and ALST's checkpoint_offload on a 4-layer
#                variant: how much of the host copies the compute hides
# Written into OUTDIR: summary.json (scripts/gpu/summary.py: the same keys in both
# modes), check.log (every part's output), the metrics files of the runs, PyTorch's
# JSON; part outputs under OUTDIR/work/.
# Programs: the bundle (scripts/gpu/pack.sh; default gpu-bundle/, or --bundle DIR).
# Python: python3 on PATH on a GPU node (PyTorch with CUDA, h5py, PyYAML), TORCH_PYTHON
# to name another; /usr/bin/python3 in the dry run.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
usage() { sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; }
out="" dry=0 budget=480 bundle=$root/gpu-bundle
while (($#)); do
  case $1 in
    --dry-run) dry=1; shift ;;
    --budget-s) budget=${2:-}; shift 2 || { echo "check.sh: --budget-s needs a value" >&2; exit 2; } ;;
    --bundle) bundle=$(realpath -m "${2:-}"); shift 2 || { echo "check.sh: --bundle needs a value" >&2; exit 2; } ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "check.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) [[ -z $out ]] || { echo "check.sh: one OUTDIR only ('$out', '$1')" >&2; exit 2; }; out=$1; shift ;;
  esac
done
[[ -n $out ]] || { usage >&2; exit 2; }
[[ $budget =~ ^[1-9][0-9]*$ ]] || { echo "check.sh: --budget-s '$budget': a positive number of seconds" >&2; exit 2; }
mkdir -p "$out/work" || exit 2
out=$(cd "$out" && pwd)
work=$out/work
: > "$out/check.log"
log() { echo "[check $(date -u +%H:%M:%S) +$((SECONDS))s] $*" | tee -a "$out/check.log"; }

# --- what runs: the bundle on a GPU, the host build in the dry run -------------------
if ((dry)); then
  mode=dry-run
  source "$root/scripts/lib/minilst_program.sh"
  minilst=$(minilst_program "$root") || exit 2
  bin=$(dirname "$minilst") tests=$(dirname "$minilst")/tests
  py=${TORCH_PYTHON:-/usr/bin/python3} torch_device=cpu
  source "$root/scripts/env.sh"
else
  mode=gpu
  [[ -x $bundle/bin/minilst ]] || { echo "check.sh: no bundle at $bundle (scripts/gpu/pack.sh; --bundle DIR)" >&2; exit 2; }
  bin=$bundle/bin tests=$bundle/tests minilst=$bundle/bin/minilst
  py=${TORCH_PYTHON:-python3} torch_device=cuda
  # cudart and cuBLAS come from the node: its loader's list, else the toolkit's lib64, else PyTorch's wheels.
  if ! ldconfig -p 2> /dev/null | grep -q 'libcublas\.so'; then
    extra=""
    for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 \
             $("$py" -c 'import nvidia, os; p = nvidia.__path__[0]; print(" ".join(os.path.join(p, d, "lib") for d in os.listdir(p)))' 2> /dev/null); do
      [[ -d $d ]] && extra+=${extra:+:}$d
    done
    export LD_LIBRARY_PATH=$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# --- the time budget -----------------------------------------------------------------
# part NAME LIMIT CMD...: runs CMD with at most LIMIT seconds, or what is left of the
# budget less a reserve for the summary; skipped when that is under a quarter of LIMIT
# (a part that cannot finish is not started). Status into work/NAME.status.
# MINILST_CHECK_SCALE (default 1) scales every limit (the dry run's budget test).
reserve=10
scale=${MINILST_CHECK_SCALE:-1}
part() {
  local name=$1 limit=$2; shift 2
  limit=$(awk -v l="$limit" -v s="$scale" 'BEGIN { v = int(l * s); print v < 1 ? 1 : v }')
  local left=$((budget - SECONDS - reserve)) box=$limit
  ((left < box)) && box=$left
  if ((box * 4 < limit)); then
    log "$name: skipped ($left s left of the ${budget} s budget, the part needs up to $limit s)"
    printf 'skipped %d %d 0\n' 0 "$limit" > "$work/$name.status"
    summarize
    return 0
  fi
  log "$name: started (at most $box s)"
  local t0=$SECONDS rc
  timeout --kill-after=5 "$box" "$@" >> "$out/check.log" 2>&1
  rc=$?
  local status=passed
  if ((rc == 124 || rc == 137)); then status=timed_out; elif ((rc != 0)); then status=failed; fi
  printf '%s %d %d %d\n' "$status" "$((SECONDS - t0))" "$limit" "$rc" > "$work/$name.status"
  log "$name: $status in $((SECONDS - t0)) s (rc $rc)"
  summarize
}
summarize() {
  "$py" "$root/scripts/gpu/summary.py" "$out" --mode "$mode" --budget-s "$budget" --bundle "$bundle" \
    >> "$out/check.log" 2>&1 || log "summary: failed (see above)"
}
trap 'log "interrupted"; summarize; exit 130' INT TERM

# --- the sizes of each mode ------------------------------------------------------------
if ((dry)); then
  attn_seqs="128 256" attn_shape=(--heads 2 --kv-heads 1 --head-dim 128) gemm_size=256
  step_sets=(--set model.hidden=256 --set model.heads=2 --set model.kv_heads=1 --set model.intermediate=512
             --set model.vocab=1000 --set run.seq_len=256 --set run.steps=3)
  offload_sets=("${step_sets[@]}" --set model.layers=3)
else
  attn_seqs="4096 16384" attn_shape=(--heads 32 --kv-heads 8 --head-dim 128) gemm_size=8192
  step_sets=()
  offload_sets=(--set model.layers=4 --set run.seq_len=8192)
fi

log "miniLST device check ($mode): budget $budget s, output $out"
log "program: $minilst"

# device: the GPU (or the host CPU in the dry run)
device_info() {
  if ((dry)); then
    echo "name=$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
    echo "driver=none (dry run on the host)"
    echo "memory_mib=$(awk '/MemTotal/ { print int($2 / 1024) }' /proc/meminfo)"
  else
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,pstate \
      --format=csv,noheader,nounits | head -1 | awk -F', ' '{ printf "name=%s\ndriver=%s\nmemory_mib=%s\nclocks_sm_mhz=%s\nclocks_max_sm_mhz=%s\nclocks_mem_mhz=%s\nclocks_max_mem_mhz=%s\npower_limit_w=%s\npstate=%s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9 }'
    nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/cuda_version=\1/p' | head -1
  fi
  echo "host=$(hostname)"
  echo "host_cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
}
part device 20 bash -c "$(declare -f device_info); dry=$dry; device_info > '$work/device.txt'; cat '$work/device.txt'"

# cuda_tests: every test program, each boxed, one line per program in work/cuda_tests.txt
cuda_tests() {
  local t rc
  : > "$work/cuda_tests.txt"
  for t in "$tests"/test_* "$tests"/copy_engine_check; do
    [[ -x $t ]] || continue
    local name
    name=$(basename "$t")
    local args=()
    [[ $name == copy_engine_check ]] || args=(--gtest_brief=1)
    # The dry run checks the mechanism on two quick programs; the GPU runs them all.
    if ((dry)) && [[ $name != test_core && $name != test_deck ]]; then continue; fi
    echo "== $name"
    OPENBLAS_NUM_THREADS=1 timeout --kill-after=5 "$per_test" "$t" "${args[@]}"
    rc=$?
    echo "$name $rc" >> "$work/cuda_tests.txt"
  done
  ! grep -qv ' 0$' "$work/cuda_tests.txt"
}
per_test=$(awk -v s="$scale" 'BEGIN { v = int(90 * s); print v < 1 ? 1 : v }')
part cuda_tests 240 bash -c "$(declare -f cuda_tests); dry=$dry tests='$tests' work='$work' per_test=$per_test; cuda_tests"

# layer_check: the bf16 layer against the host's float64 losses (the deck's reference answer)
part layer_check 60 "$minilst" run "$root/inputs/gpu_layer_check.yaml" \
  --set output.metrics="$out/layer_check.h5" --set output.overwrite=true

# attention: one process per S (its own cuBLAS GEMM rate beside it)
attention() {
  local S
  for S in $attn_seqs; do
    "$bin/minilst_bench_kernels" attention --precision bf16 --seq-len "$S" "${attn_shape[@]}" --repeats 3 \
      --gemm-size "$gemm_size" | tee -a "$work/attention.jsonl" || return 1
  done
}
rm -f "$work/attention.jsonl"
part attention 90 bash -c "$(declare -f attention); bin='$bin' work='$work' attn_seqs='$attn_seqs' gemm_size=$gemm_size attn_shape=(${attn_shape[*]}); attention"

# step: miniLST, then PyTorch on the same shapes; the driver's memory sampled during miniLST's run
step() {
  local sampler=""
  if ((!dry)); then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$work/memory_used.txt" 2> /dev/null &
    sampler=$!
    sleep 1  # the idle level first
  fi
  "$minilst" plan "$root/inputs/llama3_8b_layer.yaml" "${step_sets[@]}" --format json > "$work/plan.json" || return 1
  "$minilst" run "$root/inputs/llama3_8b_layer.yaml" "${step_sets[@]}" --set output.metrics="$out/step_minilst.h5" \
    --set output.overwrite=true
  local rc=$?
  [[ -z $sampler ]] || kill "$sampler" 2> /dev/null
  ((rc == 0)) || return $rc
  local chunks steps
  read -r chunks steps < <("$py" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r'); print(f.attrs['lm_head_chunks'], len(f['loss']))" "$out/step_minilst.h5")
  "$py" "$root/analysis/peer/torch_step.py" --config-from "$out/step_minilst.h5" --steps "$steps" --threads 1 \
    --device "$torch_device" --precision bf16 --lm-head-chunks "$chunks" --out "$out/step_torch.json"
}
part step 240 bash -c "$(declare -f step); dry=$dry minilst='$minilst' root='$root' out='$out' work='$work' py='$py' torch_device=$torch_device step_sets=(${step_sets[*]}); step"

# offload: MEMO's swap with alpha chosen by the run, and ALST's checkpoint offload
offload() {
  local policy
  for policy in offload checkpoint_offload; do
    "$minilst" run "$root/inputs/llama3_8b_layer.yaml" "${offload_sets[@]}" --set memory.policy=$policy \
      --set output.metrics="$out/offload_$policy.h5" --set output.overwrite=true || return 1
  done
}
part offload 150 bash -c "$(declare -f offload); minilst='$minilst' root='$root' out='$out' offload_sets=(${offload_sets[*]}); offload"

trap - INT TERM
summarize
log "done in $SECONDS s: $out/summary.json"
"$py" -c "import json, sys; s = json.load(open(sys.argv[1])); print('check:', s['verdict'], '-', s['headline'])" "$out/summary.json" \
  | tee -a "$out/check.log"
