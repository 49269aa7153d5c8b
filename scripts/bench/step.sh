#!/usr/bin/env bash
# The training step against its peer: a deck run by miniLST and the same step in
# PyTorch (analysis/peer/torch_step.py: same model, shapes, AdamW, CPU, threads,
# precision: bf16 is autocast with fp32 master weights), one process each,
# alternating, plus the machine's own GEMM rate in the run's precision (fp32: the
# BLAS's SGEMM; bf16: oneDNN's matmul, the CPU's matrix unit where it has one) and
# the attention kernel alone, all in this one run. Writes runs/bench/step_<UTC
# time>/ with every metrics file, step_bench.h5 (per phase: seconds, GFLOP/s,
# fraction of that GEMM rate, for both) and step_bench.png (a roofline-style bar
# chart), and prints the ratio.
#   scripts/bench/step.sh [DECK] [--seq-lens 2048,8192] [--rounds 2] [--threads 1]
#                         [--precision float|bf16] [--attention-seq-len 8192] [--set k=v ...]
# Default deck: inputs/step_cpu.yaml (one layer, d = 1024, S = 2048, V = 32000).
# BLAS: OpenBLAS picks its kernels from the CPU it detects; where it does not know
# the CPU it falls back to slow generic ones. Unless OPENBLAS_CORETYPE is set, the
# script measures SGEMM under the detected kernels and under the named sets this CPU
# can run (fastest_blas_coretype in common.sh: a set that fails is skipped) and runs
# everything (miniLST and PyTorch, which uses the same OpenBLAS) with the fastest.
# An OPENBLAS_CORETYPE naming kernels the CPU cannot run is ignored with a warning.
# MINILST_BIN_DIR=dir skips the set-up and the build; OUT=dir names the output directory.
source "$(dirname "$0")/common.sh"

deck="$root/inputs/step_cpu.yaml" seq_lens="" rounds=2 threads=1 attention_seq=8192 precision="" extra=()
if [[ $# -gt 0 && $1 != --* ]]; then deck=$(realpath "$1"); shift; fi
while (($#)); do
  case $1 in
    --seq-lens) seq_lens=${2//,/ }; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --attention-seq-len) attention_seq=$2; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    *) echo "step.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case $precision in
  "") ;;
  float|bf16) extra+=(--set run.precision="$precision") ;;
  *) echo "step.sh: --precision '$precision': float or bf16" >&2; exit 2 ;;
esac
out=${OUT:-$(unique_dir "$root/runs/bench" step)}
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads

if [[ -z ${OPENBLAS_CORETYPE+x} ]]; then  # (common.sh has unset one naming kernels this CPU cannot run)
  { best=$(fastest_blas_coretype 2>&3); } 3>&1  # its report on stdout, as the rest
  if [[ -n $best ]]; then export OPENBLAS_CORETYPE=$best; fi
fi
echo "BLAS kernels: ${OPENBLAS_CORETYPE:-as detected}" | tee "$out/blas.txt"

deck_S=$("$py" -c "import yaml; print(yaml.safe_load(open('$deck')).get('run', {}).get('seq_len', ''))")
[[ -n $seq_lens ]] || seq_lens=$deck_S
for S in $seq_lens; do
  ref=()  # another S is another problem: the deck's reference losses do not apply
  [[ $S == "$deck_S" ]] || ref=(--set reference.losses=)
  for r in $(seq 1 "$rounds"); do
    echo "== S = $S, round $r: miniLST"
    "$minilst" run "$deck" "${extra[@]}" "${ref[@]}" --set run.seq_len="$S" --set output.metrics="$out/minilst_S${S}_r$r.h5" \
      > "$out/minilst_S${S}_r$r.log" 2>&1 || { tail -20 "$out/minilst_S${S}_r$r.log"; exit 1; }
    grep '^RESULT' "$out/minilst_S${S}_r$r.log"
    read -r steps run_precision < <("$py" -c "import h5py; f = h5py.File('$out/minilst_S${S}_r$r.h5', 'r')
print(len(f['loss']), f.attrs['precision'])")
    [[ $run_precision == bf16 || $run_precision == float ]] ||
      { echo "step.sh: run.precision $run_precision has no PyTorch peer (float or bf16)" >&2; exit 2; }
    echo "== S = $S, round $r: PyTorch"
    "$py" "$root/analysis/peer/torch_step.py" --config-from "$out/minilst_S${S}_r$r.h5" --steps "$steps" \
      --threads "$threads" --precision "$([[ $run_precision == bf16 ]] && echo bf16 || echo fp32)" \
      --out "$out/torch_S${S}_r$r.json" | tail -1
  done
done
"$bin/minilst_bench_kernels" sgemm > "$out/sgemm.json"
if [[ $run_precision == bf16 ]]; then  # the machine's bf16 rate: oneDNN where this build has it, else the run's path
  "$bin/minilst_bench_kernels" bf16gemm --gemm-bf16 onednn > "$out/bf16gemm.json" 2> /dev/null ||
    "$bin/minilst_bench_kernels" bf16gemm > "$out/bf16gemm.json"
fi
"$py" - "$out/minilst_S${S}_r1.h5" "$out/attention.json" "$bin/minilst_bench_kernels" "$attention_seq" <<'PY'
import h5py, subprocess, sys, yaml
f = h5py.File(sys.argv[1], "r")
m = yaml.safe_load(f.attrs["config"])["model"]  # the deck as resolved
h = int(m["hidden"]) // int(m["heads"])
ran = str(f.attrs["attention_kernel"])  # the kernel the run used, in its precision
kernel = "onednn" if ran.startswith("onednn") else "tensor_core" if ran.startswith("tensor_core") else "portable"
cmd = [sys.argv[3], "attention", "--seq-len", sys.argv[4], "--heads", str(m["heads"]), "--kv-heads", str(m["kv_heads"]),
       "--head-dim", str(h), "--repeats", "1", "--kernel", kernel,
       "--precision", "bf16" if str(f.attrs["precision"]) == "bf16" else "float"]
open(sys.argv[2], "w").write(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
PY
"$py" "$root/analysis/step_bench.py" "$out"
