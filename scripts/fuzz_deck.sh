#!/usr/bin/env bash
# The long deck-fuzzing campaign (ctest's fuzz_deck runs 400 decks): N mutated
# decks from every shipped deck, through the parser, the rules and the memory
# model, with the process's memory capped so a runaway allocation is a failure,
# not an OOM kill; then the saved corpus. Failing decks are kept in runs/fuzz/.
#   scripts/fuzz_deck.sh [DECKS (default 20000)] [SEED (default: the date)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
decks=${1:-20000} seed=${2:-$(date +%Y%m%d)}
if [[ -z ${MINILST_BIN_DIR:-} ]]; then bash "$root/scripts/build.sh" > /dev/null; fi
fuzz=${MINILST_BIN_DIR:-$root/build}/tests/fuzz_deck
keep=$root/runs/fuzz
mkdir -p "$keep"
ulimit -v 8000000  # 8 GB of address space
"$fuzz" --decks "$decks" --seed "$seed" --keep "$keep" "$root"/inputs/*.yaml | grep -v '^refused' || status=1
"$fuzz" --corpus "$root/tests/fuzz/corpus" | tail -n 1 || status=1
echo "seed $seed; failing decks (if any) in $keep"
exit ${status:-0}
