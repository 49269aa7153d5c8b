#!/usr/bin/env bash
# Each step line says where the run stands: the wall clock (UTC), the time since the first step
# began and an ETA (the steps left times the mean measured step), so a batch job's log can be read
# while it runs. One rank of the scaling deck, 6 steps of about a tenth of a second or more.
source "$(dirname "$0")/common.sh"
"$MINILST" run "$MINILST_SOURCE/inputs/scaling_cpu.yaml" --set run.steps=6 --set run.warmup_steps=1 \
  --set output.metrics="$tmp/p.h5" > run.log 2>&1 || { cat run.log; echo "FAIL: run"; exit 1; }
"$PYTHON" - run.log <<'PY'
import re, sys
line = re.compile(r"^step +(\d+)/6 .* MiB  (\d\d):(\d\d):(\d\d)Z  elapsed (\d+):(\d\d):(\d\d)  eta (\d+):(\d\d):(\d\d)")
seconds = lambda h, m, s: int(h) * 3600 + int(m) * 60 + int(s)
steps = [m for m in map(line.match, open(sys.argv[1])) if m]
assert [int(m.group(1)) for m in steps] == list(range(1, 7)), "every step line carries clock, elapsed and eta"
elapsed = [seconds(*m.group(5, 6, 7)) for m in steps]
eta = [seconds(*m.group(8, 9, 10)) for m in steps]
assert elapsed == sorted(elapsed), f"elapsed never goes back: {elapsed}"
assert eta[-1] == 0, f"nothing left after the last step: {eta}"
step_s = [float(re.search(r"(\d+\.\d+) s ", m.string).group(1)) for m in steps]
expected = sum(step_s[1:3]) / 2 * 3  # after step 3: three steps left at the mean of the measured two
assert abs(eta[2] - expected) <= 1, f"eta after step 3: {eta[2]} s, expected about {expected:.1f} s"
print(f"step lines: elapsed {elapsed}, eta {eta}")
PY
