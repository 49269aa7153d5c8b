#!/usr/bin/env bash
# The long fuzzing campaign (ctest's fuzz_deck and fuzz_processes run a few hundred
# inputs): in process, N mutated decks from every shipped deck, 3N mutated command
# lines (run, plan with --max-seq-len, keys, ...) and N output names, through the
# parser, the rules, `minilst plan` and the output checks, with the process's memory
# capped so a runaway allocation is a failure, not an OOM kill; then the saved corpus;
# then P process cases (signals at random moments, ranks given different command
# lines). Failing or slow inputs are kept in runs/fuzz/.
#   scripts/fuzz_deck.sh [N (default 20000: 10^5 inputs)] [SEED (default: the date)] [P (default 100)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
decks=${1:-20000} seed=${2:-$(date +%Y%m%d)} processes=${3:-100}
if [[ -z ${MINILST_BIN_DIR:-} ]]; then bash "$root/scripts/build.sh" > /dev/null; fi
bin=${MINILST_BIN_DIR:-$root/build}
keep=$root/runs/fuzz
mkdir -p "$keep"
status=0
(
  ulimit -v 8000000  # 8 GB of address space
  "$bin/tests/fuzz_deck" --decks "$decks" --commands $((3 * decks)) --outputs "$decks" --seed "$seed" --keep "$keep" \
    "$root"/inputs/*.yaml | grep -v '^refused'
) || status=1
"$bin/tests/fuzz_deck" --corpus "$root/tests/fuzz/corpus" | tail -n 1 || status=1
source "$root/scripts/env.sh"
MINILST=$bin/minilst MINILST_SOURCE=$root bash "$root/tests/fuzz/fuzz_processes.sh" "$processes" "$seed" | tail -n 3 \
  || status=1
echo "seed $seed; failing inputs (if any) in $keep"
exit $status
