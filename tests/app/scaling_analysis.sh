#!/usr/bin/env bash
# The scaling analysis stays runnable: four small runs named as scripts/scaling.sh
# names them (local, Ulysses, ring with and without overlap), then
# analysis/scaling.py must produce its table, the ring-vs-Ulysses line, the
# hidden-communication estimate, the communication check and a PNG.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON, MPIEXEC.
source "$(dirname "$0")/common.sh"
deck=(run "$MINILST_SOURCE/inputs/tiny.yaml" --set run.steps=3 --set run.warmup_steps=1)
"$MINILST" "${deck[@]}" --set output.metrics=local_np1.h5 > /dev/null
for cfg in "ulysses_np2 parallel.ulysses=2" "ring_zigzag_np2 parallel.ring=2" \
           "ring_zigzag_nooverlap_np2 parallel.ring=2 --set parallel.ring_overlap=false"; do
  read -r name sets <<< "$cfg"
  # shellcheck disable=SC2086
  "${MPIEXEC:-mpiexec}" -n 2 --oversubscribe "$MINILST" "${deck[@]}" --set $sets --set output.metrics=$name.h5 > /dev/null
done
"$PYTHON" "$MINILST_SOURCE/analysis/scaling.py" . --png scaling.png --csv scaling.csv | tee out.txt
grep -q "ring vs ulysses step time at 2 ranks" out.txt
grep -q "fraction of ring communication hidden" out.txt
grep -q "final losses agree" out.txt
test -s scaling.png && test -s scaling.csv
echo "scaling analysis: ok"
