#!/usr/bin/env bash
# Threads inside a rank against ranks: each deck as 1 rank x 1 thread, 1 rank x T
# threads and T ranks x 1 thread (T = the cores; MINILST_BIN_DIR: a build with a
# threaded Kokkos, e.g. build-omp), alternating, and the speed-ups of the step
# time over 1 x 1. Writes runs/bench/threads_<UTC time>/ (metrics files, threads.h5).
#   MINILST_BIN_DIR=build-omp scripts/bench/threads.sh [DECK ...] [--threads T] [--rounds R] [--set K=V ...]
# --set goes to every run (e.g. --set run.precision=bf16 for the bf16 step).
# Default decks: inputs/default.yaml and inputs/step_cpu.yaml (the step benchmark's
# 1-layer d=1024 shape). The same tokens in every configuration: the 1-rank runs set
# parallel.ring=1 (and ulysses=1), the T-rank runs split the sequence over a ring of T.
source "$(dirname "$0")/common.sh"
threads=$(getconf _NPROCESSORS_ONLN) rounds=2 decks=() sets=()  # not nproc: it obeys OMP_NUM_THREADS
while (($#)); do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    *) decks+=("$(realpath "$1")"); shift ;;
  esac
done
((${#decks[@]})) || decks=("$root/inputs/default.yaml" "$root/inputs/step_cpu.yaml")
out=${OUT:-$(unique_dir "$root/runs/bench" threads)}
mkdir -p "$out"
for deck in "${decks[@]}"; do
  name=$(basename "$deck" .yaml)
  for r in $(seq 1 "$rounds"); do
    for cfg in "1x1" "1x$threads" "${threads}x1"; do
      ranks=${cfg%x*} t=${cfg#*x}
      f="$out/${name}_${cfg}_r$r.h5"
      layout=(--set parallel.ring=1 --set parallel.ulysses=1)
      if [[ $ranks -gt 1 ]]; then layout=(--set parallel.ring="$ranks" --set parallel.ulysses=1); fi
      MINILST_THREADS=$t OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t mpiexec --oversubscribe --bind-to none -n "$ranks" \
        "$minilst" run "$deck" "${layout[@]}" "${sets[@]}" --set output.metrics="$f" > "${f%.h5}.log" 2>&1 \
        || { tail -20 "${f%.h5}.log"; exit 1; }
      echo "$name $cfg round $r: $(sed -n 's/^RESULT: \(.*\) metrics=.*/\1/p' "${f%.h5}.log")"
    done
  done
done
"$py" - "$out" <<'PY'
import glob, os, re, sys
import h5py, numpy as np
out = sys.argv[1]
times = {}
for path in glob.glob(os.path.join(out, "*_r*.h5")):
    name, cfg = re.match(r"(.*)_(\d+x\d+)_r\d+\.h5$", os.path.basename(path)).groups()
    f = h5py.File(path, "r")
    w = int(f.attrs["warmup_steps"])
    times.setdefault(name, {}).setdefault(cfg, []).append(float(f["timings"]["step"][w:].max(axis=1).mean()))
with h5py.File(os.path.join(out, "threads.h5"), "w") as h:
    for name, d in sorted(times.items()):
        base = np.mean(d["1x1"])
        g = h.create_group(name)
        line = []
        for cfg in sorted(d, key=lambda c: (c != "1x1", c)):
            t = np.mean(d[cfg])
            g.attrs[f"step_s_{cfg}"] = t
            g.attrs[f"speedup_{cfg}"] = base / t
            line.append(f"{cfg} {t:.3f} s (x{base / t:.2f})")
        print(f"{name}: " + ", ".join(line) + "  [ranks x threads, step time, speed-up over 1x1]")
print(f"table: {os.path.join(out, 'threads.h5')}")
PY
