#!/usr/bin/env bash
# The reference answer of a deck: its loss per step computed once in double
# precision on one rank (miniLST's single-rank step, itself checked against an
# independent PyTorch implementation by the reference_torch_* tests), printed as
# the deck's `reference:` section to paste into it. Layout keys (ulysses, ring)
# are set to 1: every layout must reproduce this curve.
#   scripts/reference_losses.sh DECK [--set section.key=value ...] [--rtol X]
# The program: scripts/lib/minilst_program.sh (MINILST=path; in a checkout the build
# tree, built first where missing; in an installed tree the installed program).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib/minilst_program.sh"
deck=$(realpath "${1:?usage: scripts/reference_losses.sh DECK [--set k=v ...] [--rtol X]}"); shift
rtol=1e-4 sets=()
while (($#)); do
  case $1 in
    --rtol) rtol=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    *) echo "reference_losses.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
build=${BUILD_DIR:-build}
[[ $build == /* ]] || build=$root/$build
if minilst_checkout "$root" && [[ -z ${MINILST:-} && ! -x $build/minilst ]]; then
  bash "$root/scripts/build.sh" > /dev/null
fi
exe=$(minilst_program "$root") || exit 2
source "$root/scripts/env.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$exe" run "$deck" "${sets[@]}" --set run.precision=double --set parallel.ulysses=1 --set parallel.ring=1 \
  --set reference.losses= --set output.metrics="$tmp/m.h5" > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
/usr/bin/python3 - "$tmp/m.h5" "$rtol" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
loss = f["loss"][:]
print("reference:        # expected loss per step (double, one rank): scripts/reference_losses.sh")
print('  losses: "' + " ".join(f"{x:.12g}" for x in loss) + '"')
print(f"  rtol: {sys.argv[2]}")
print(f'  problem: "{f.attrs["problem_digest"]}"      # digest of the problem the losses belong to')
PY
