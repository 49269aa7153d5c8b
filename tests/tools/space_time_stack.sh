#!/usr/bin/env bash
# Kokkos Tools: builds the space-time-stack tool from the Kokkos Tools sources
# (a tarball or tree in MINILST_KOKKOS_TOOLS), runs the tiny deck with it loaded
# (KOKKOS_PROFILE_LIBRARY for Kokkos 3.x, KOKKOS_TOOLS_LIBS for 4.x: both set),
# with its output threshold at 0 (every region reported, however short), and
# finds every phase the metrics file timed as a [region] of its report.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON, MINILST_KOKKOS_TOOLS.
source "$(dirname "$0")/../app/common.sh"
: "${MINILST_KOKKOS_TOOLS:?the Kokkos Tools sources (tarball or directory)}"
mkdir tools
if [[ -d $MINILST_KOKKOS_TOOLS ]]; then cp -a "$MINILST_KOKKOS_TOOLS/." tools/
else tar xzf "$MINILST_KOKKOS_TOOLS" -C tools --strip-components=1; fi
(cd tools/profiling/space-time-stack && mpicxx -O2 -shared -fPIC -std=c++17 -I. -I../all -I../../common/makefile-only \
  -I../../common -o libkp_space_time_stack.so kp_space_time_stack.cpp)
lib=$PWD/tools/profiling/space-time-stack/libkp_space_time_stack.so
KOKKOS_PROFILE_LIBRARY=$lib KOKKOS_TOOLS_LIBS=$lib "$MINILST" run "$MINILST_SOURCE/inputs/tiny.yaml" --kokkos-tools-args=0 \
  --set memory.policy=checkpoint --set run.steps=2 --set output.metrics="$tmp/m.h5" > run.log 2>&1 \
  || { cat run.log; exit 1; }
grep -q "BEGIN KOKKOS PROFILING REPORT" run.log || { echo "FAIL: no report from the tool"; cat run.log; exit 1; }
"$PYTHON" - "$tmp/m.h5" run.log <<'PY'
import re, sys, h5py
f = h5py.File(sys.argv[1], "r")
report = open(sys.argv[2]).read()
regions = set(re.findall(r"\s([A-Za-z_]+) \[region\]", report))
# every phase the run timed on its compute thread (copy_engine_busy is the copy engine's)
timed = [p for p in f["timings"] if p != "copy_engine_busy" and f["timings"][p][:].max() > 0]
missing = [p for p in timed if p not in regions]
print(f"phases timed: {sorted(timed)}; regions in the report: {sorted(regions)}")
print("every timed phase is a region" if not missing else f"FAIL: missing regions {missing}")
sys.exit(1 if missing else 0)
PY
