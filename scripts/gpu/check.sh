#!/usr/bin/env bash
# The device check: one command, run from the repository root on a GPU node, that
# runs every GPU part of miniLST under a time budget and writes what it found into
# OUTDIR. Each part is time-boxed; a part that fails or runs out of time is
# recorded as such and the others still run; the summary is rewritten after every
# part, so what finished is kept whatever stops the check.
#
#   scripts/gpu/check.sh OUTDIR [--dry-run] [--budget-s 480] [--bundle DIR]
#
# Parts, in order: the correctness gate, then the headline figures, then the rest
# (GPU sizes; --dry-run: the same parts at tiny sizes on the host build in build/,
# PyTorch on the CPU, so that the script itself is tested here):
#   device       the GPU's name, driver, memory and clocks (nvidia-smi), and a preflight:
#                every library of the bundle resolves, PyTorch sees the GPU
#   layer_check  a one-layer bf16 step (inputs/gpu_layer_check.yaml) whose losses must
#                match the float64 losses the host computed for the same deck (the same
#                deck in the dry run: it is small)
#   step         the one-layer Llama-3-8B step (inputs/llama3_8b_layer.yaml, S = 16384)
#                beside PyTorch's (SDPA's fused kernels, bf16 autocast, fused AdamW, the
#                LM head whole where it fits) on the same GPU; MFU of both; device memory
#                (tracked, and the driver's) against the plan
#   attention    the attention kernel alone, forward + backward, bf16, head dim 128,
#                S = 4096 and 16384, against the cuBLAS bf16 GEMM rate of the same process
#   cuda_tests   the test programs built for CUDA: tensor-core attention against the
#                float64 reference kernel, the GEMMs (cuBLAS), the copy engine, the
#                model, planner and layouts on one GPU
#   team_rows    the row-wise kernels in the GPU's layout (MINILST_ROW_LAYOUT=team): the
#                model's tests, the layer check and the one-layer step with it
#   offload      MEMO's offload (alpha auto) and ALST's checkpoint_offload on a 4-layer
#                variant (vocabulary 32000): how much of the host copies the compute hides
# Written into OUTDIR: summary.json (scripts/gpu/summary.py: the same keys in both
# modes), check.log (every part's output), the metrics files of the runs, PyTorch's
# JSON; part outputs under OUTDIR/work/.
# Programs: the bundle (scripts/gpu/pack.sh; default gpu-bundle/, or --bundle DIR).
# Python: python3 on PATH on a GPU node (PyTorch with CUDA, h5py, PyYAML), TORCH_PYTHON
# to name another; /usr/bin/python3 in the dry run.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
usage() { sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; }
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
# OUTDIR: new, empty, or an earlier check's (its check.log): nothing else of a user's is touched.
if [[ -d $out && -n "$(ls -A "$out" 2> /dev/null)" && ! -f $out/check.log ]]; then
  echo "check.sh: OUTDIR '$out' holds files but no earlier check's check.log: name a new or empty folder" >&2
  exit 2
fi
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
work=$out/work
# A fresh start: what an earlier check left here would be read as this one's.
rm -rf "$work" "$out"/{summary.json,layer_check.h5,step_minilst.h5,step_torch.json} "$out"/offload_*.h5 "$out"/team_rows_*.h5
mkdir -p "$work" || exit 2
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
fi
# PyTorch runs with the node's own library path (orig_ld): its wheels bring their CUDA
# libraries, and the toolkit's must not shadow them.
orig_ld=${LD_LIBRARY_PATH:-}
if ((!dry)) && [[ $(ldd "$minilst" 2> /dev/null) == *'not found'* ]]; then  # (no pipe: grep -q would SIGPIPE ldd)
  # cudart and cuBLAS come from the node: its loader's list, else the toolkit's lib64, else PyTorch's wheels.
  extra=""
  for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 \
           $(LD_LIBRARY_PATH=$orig_ld "$py" -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)))' 2> /dev/null); do
    [[ -d $d ]] && extra+=${extra:+:}$d
  done
  [[ -z $extra ]] || export LD_LIBRARY_PATH=$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# --- the time budget -----------------------------------------------------------------
# part NAME LIMIT MIN CMD...: runs CMD with at most LIMIT seconds, or what is left of
# the budget less a reserve for the summary; not started (skipped) when less than MIN
# seconds are left, the least in which the part can finish. Status into
# work/NAME.status: passed, failed, timed_out (its own limit), cut_short (stopped by
# the budget before its limit: the check ran out of time, not the part) or skipped.
# MINILST_CHECK_SCALE (default 1) scales every limit (the dry run's budget test).
scaled() { awk -v l="$1" -v s="$scale" 'BEGIN { v = int(l * s); print v < 1 ? 1 : v }'; }
reserve=10
scale=${MINILST_CHECK_SCALE:-1}
part() {
  local name=$1 limit min
  limit=$(scaled "$2") min=$(scaled "$3"); shift 3
  local left=$((budget - SECONDS - reserve)) box=$limit
  ((left < box)) && box=$left
  if ((left < min)); then
    log "$name: skipped ($left s left of the ${budget} s budget, the part needs at least $min s)"
    printf 'skipped %d %d 0\n' 0 "$limit" > "$work/$name.status"
    summarize
    return 0
  fi
  log "$name: started (at most $box s)"
  local t0=$SECONDS rc
  timeout --kill-after=5 "$box" "$@" >> "$out/check.log" 2>&1
  rc=$?
  local status=passed
  if (((rc == 124 || rc == 137) && SECONDS - t0 >= box)); then  # the box ran out (not a crash's 137)
    status=timed_out
    ((box < limit)) && status=cut_short
  elif ((rc != 0)); then
    status=failed
  fi
  printf '%s %d %d %d\n' "$status" "$((SECONDS - t0))" "$limit" "$rc" > "$work/$name.status"
  log "$name: $status in $((SECONDS - t0)) s (rc $rc)"
  summarize
}
summarize() {
  LD_LIBRARY_PATH=$orig_ld "$py" "$root/scripts/gpu/summary.py" "$out" --mode "$mode" --budget-s "$budget" --bundle "$bundle" \
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
  offload_sets=(--set model.layers=4 --set model.vocab=32000 --set run.seq_len=8192)
fi

log "miniLST device check ($mode): budget $budget s, output $out"
log "program: $minilst"

# device: the GPU (or the host CPU in the dry run), then the preflight: every library
# of the programs resolves (the GLIBCXX versions too), and PyTorch, h5py and PyYAML load
# (on a GPU node PyTorch must see the GPU); a failed preflight fails this part at once.
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
preflight() {
  local f missing="" ok=1
  for f in "$bin"/* "$tests"/*; do
    [[ -f $f && -x $f ]] || continue
    head -c 4 "$f" | grep -q 'ELF' || continue
    missing+=$(ldd "$f" 2>&1 | grep 'not found' | sed "s|^[[:space:]]*|$(basename "$f"): |" | tr '\n' ';')
  done
  if [[ -n $missing ]]; then echo "preflight_libraries=missing: $missing"; ok=0; else echo "preflight_libraries=ok"; fi
  local torch
  torch=$(LD_LIBRARY_PATH=$orig_ld "$py" -c 'import torch, h5py, yaml; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())' 2>&1 | tail -1)
  echo "preflight_python=$torch"
  if ! [[ $torch =~ ^[0-9] ]]; then ok=0; elif ((!dry)) && [[ $torch != *True ]]; then ok=0; fi
  ((ok))
}
part device 30 5 bash -c "set -o pipefail; $(declare -f device_info preflight); dry=$dry bin='$bin' tests='$tests' py='$py' orig_ld='$orig_ld'
  { device_info && preflight; } > '$work/device.txt'; rc=\$?; cat '$work/device.txt'; exit \$rc"

# layer_check: the bf16 layer against the host's float64 losses (the deck's reference answer)
part layer_check 60 30 "$minilst" run "$root/inputs/gpu_layer_check.yaml" \
  --set output.metrics="$out/layer_check.h5" --set output.overwrite=true

# step: miniLST, then PyTorch on the same shapes; the driver's memory sampled during
# miniLST's run. PyTorch takes its LM head whole, as its users write it; where that does
# not fit, in miniLST's mini-sequences (step_torch.json records which).
step() {
  sampler=""  # global: the EXIT trap stops it however the part ends
  trap '[[ -z $sampler ]] || kill $sampler 2> /dev/null' EXIT
  if ((!dry)); then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$work/memory_used.txt" 2> /dev/null &
    sampler=$!
    sleep 1  # the idle level first
  fi
  "$minilst" plan "$root/inputs/llama3_8b_layer.yaml" "${step_sets[@]}" --format json > "$work/plan.json" || return 1
  "$minilst" run "$root/inputs/llama3_8b_layer.yaml" "${step_sets[@]}" --set output.metrics="$out/step_minilst.h5" \
    --set output.overwrite=true || return 1
  kill "$sampler" 2> /dev/null
  sampler=""
  local chunks steps
  read -r chunks steps < <(LD_LIBRARY_PATH=$orig_ld "$py" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r'); print(f.attrs['lm_head_chunks'], len(f['loss']))" "$out/step_minilst.h5")
  [[ -n $steps ]] || return 1
  local c
  for c in $(printf '%s\n' 1 "$chunks" | uniq); do
    LD_LIBRARY_PATH=$orig_ld "$py" "$root/analysis/peer/torch_step.py" --config-from "$out/step_minilst.h5" \
      --steps "$steps" --threads 1 --device "$torch_device" --precision bf16 --lm-head-chunks "$c" \
      --out "$out/step_torch.json" && return 0
    echo "step: PyTorch with $c LM-head chunk(s) failed"
  done
  return 1
}
part step 240 120 bash -c "set -o pipefail; $(declare -f step); dry=$dry minilst='$minilst' root='$root' out='$out' work='$work' py='$py' orig_ld='$orig_ld' torch_device=$torch_device step_sets=(${step_sets[*]}); step"

# attention: one process per S (its own cuBLAS GEMM rate beside it)
attention() {
  local S
  for S in $attn_seqs; do
    "$bin/minilst_bench_kernels" attention --precision bf16 --seq-len "$S" "${attn_shape[@]}" --repeats 3 \
      --gemm-size "$gemm_size" | tee -a "$work/attention.jsonl" || return 1
  done
}
part attention 90 50 bash -c "set -o pipefail; $(declare -f attention); bin='$bin' work='$work' attn_seqs='$attn_seqs' gemm_size=$gemm_size attn_shape=(${attn_shape[*]}); attention"

# cuda_tests: every test program, each boxed, one line per program in work/cuda_tests.txt
# (name, exit code, tests passed, tests skipped: GoogleTest's own counts)
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
    # --foreground: the test stays in this part's process group, so the part's own limit stops it too.
    OPENBLAS_NUM_THREADS=1 MINILST_MACHINES="$machines" timeout --foreground --kill-after=5 "$per_test" "$t" "${args[@]}" 2>&1 |
      tee "$work/$name.log"
    rc=${PIPESTATUS[0]}
    local passed skipped
    passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$work/$name.log" | tail -1)
    skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$work/$name.log" | tail -1)
    echo "$name $rc ${passed:--} ${skipped:-0}" >> "$work/cuda_tests.txt"
  done
  ! awk '$2 != 0 { bad = 1 } END { exit !bad }' "$work/cuda_tests.txt"
}
per_test=$(scaled 60)
part cuda_tests 150 60 bash -c "set -o pipefail; $(declare -f cuda_tests); dry=$dry tests='$tests' work='$work' per_test=$per_test machines='$root/machines'; cuda_tests"

# team_rows: the row-wise kernels (RMSNorm, SwiGLU, cross-entropy) in the GPU's layout
# (MINILST_ROW_LAYOUT=team: a team per row, coalesced): the model's tests, the layer check
# and the one-layer step with it, beside the default layout's figures above
team_rows() {
  export MINILST_ROW_LAYOUT=team
  OPENBLAS_NUM_THREADS=1 "$tests/test_model" --gtest_brief=1 || return 1
  "$minilst" run "$root/inputs/gpu_layer_check.yaml" --set output.metrics="$out/team_rows_layer.h5" \
    --set output.overwrite=true || return 1
  "$minilst" run "$root/inputs/llama3_8b_layer.yaml" "${step_sets[@]}" --set run.steps=3 \
    --set output.metrics="$out/team_rows_step.h5" --set output.overwrite=true
}
part team_rows 120 40 bash -c "set -o pipefail; $(declare -f team_rows); minilst='$minilst' tests='$tests' root='$root' out='$out' step_sets=(${step_sets[*]}); team_rows"

# offload: MEMO's swap with alpha chosen by the run, and ALST's checkpoint offload
offload() {
  local policy
  for policy in offload checkpoint_offload; do
    "$minilst" run "$root/inputs/llama3_8b_layer.yaml" "${offload_sets[@]}" --set memory.policy=$policy \
      --set output.metrics="$out/offload_$policy.h5" --set output.overwrite=true || return 1
  done
}
part offload 200 100 bash -c "set -o pipefail; $(declare -f offload); minilst='$minilst' root='$root' out='$out' offload_sets=(${offload_sets[*]}); offload"

trap - INT TERM
summarize
log "done in $SECONDS s: $out/summary.json"
LD_LIBRARY_PATH=$orig_ld "$py" -c "import json, sys; s = json.load(open(sys.argv[1])); print('check:', s['verdict'], '-', s['headline'])" "$out/summary.json" \
  | tee -a "$out/check.log"
