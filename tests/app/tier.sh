#!/usr/bin/env bash
# The procurement tiers (RUN_RULES.md, Tiers): run.tier on the RESULT line, granted or refused with the
# reason, in the metrics file (tier, tier_claimed, shipped_deck) and in `minilst result`:
#  - a shipped deck (default) claiming baseline: granted where the program was built from an unmodified
#    tree (git_dirty = false), else refused for the modified source; claiming optimized: granted;
#  - the same deck with another seq_len (not a shipped problem): refused whatever the claim;
#  - a tier the deck key does not know: refused naming run.tier.
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
deck=$MINILST_SOURCE/inputs/default.yaml
fail() { echo "FAIL: $*"; exit 1; }
run() {  # run NAME ARGS...: one rank, 3 steps; prints the RESULT line
  "$MINILST" run "$deck" --set parallel.ring=1 --set run.steps=2 --set run.warmup_steps=1 --set output.metrics="$1.h5" "${@:2}" > "$1.log" 2>&1 \
    || true
  grep '^RESULT: ' "$1.log" || { cat "$1.log"; fail "$1: no RESULT line"; }
}
attr() { "$PYTHON" -c "import h5py, sys; print(h5py.File(sys.argv[1], 'r').attrs[sys.argv[2]])" "$1" "$2"; }

line=$(run baseline)
dirty=$(attr baseline.h5 git_dirty)
[[ $(attr baseline.h5 shipped_deck) == default && $(attr baseline.h5 tier_claimed) == baseline ]] \
  || fail "shipped_deck/tier_claimed: $(attr baseline.h5 shipped_deck)/$(attr baseline.h5 tier_claimed)"
if [[ $dirty == false ]]; then
  grep -q ' tier=baseline reportable=' <<< "$line" || fail "a clean build of a shipped deck: $line"
else
  grep -q ' tier=none (claimed baseline: built from a modified source tree (git_dirty)) reportable=' <<< "$line" \
    || fail "a modified tree claiming baseline: $line"
fi
echo "baseline (git_dirty $dirty): ok"

line=$(run optimized --set run.tier=optimized)
grep -q ' tier=optimized reportable=' <<< "$line" || fail "optimized on a shipped deck: $line"
"$MINILST" result optimized.h5 | grep -q ' tier=optimized reportable=' || fail "minilst result lost the tier"
echo "optimized: ok"

line=$(run other --set run.tier=ported --set run.seq_len=512)
digest=$(attr other.h5 problem_digest)
grep -q " tier=none (claimed ported: the deck's problem $digest is no shipped deck's" <<< "$line" \
  || fail "a problem of no shipped deck: $line"
[[ -z $(attr other.h5 shipped_deck) ]] || fail "shipped_deck of another problem: $(attr other.h5 shipped_deck)"
echo "not a shipped problem: ok"

rc=0
"$MINILST" run "$deck" --set run.tier=gold > bad.log 2>&1 || rc=$?
[[ $rc != 0 ]] && grep -q "run.tier" bad.log || { cat bad.log; fail "run.tier=gold was accepted (exit $rc)"; }
echo "unknown tier refused: ok"
