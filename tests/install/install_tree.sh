#!/usr/bin/env bash
# The installed tree: `cmake --install` of the build that made $MINILST into a
# temporary prefix, then, with no build tree or checkout reachable:
#   - the installed program runs the installed tiny deck from another directory;
#   - installed scripts find the installed program (scripts/lib/minilst_program.sh)
#     and neither set up nor build;
#   - an external CMake project finds the package (find_package(miniLST 0.1)) and
#     runs miniLST::minilst; the version file refuses 1.0;
#   - the Spack recipe's check (tests/install/check_spack_recipe.py) passes on it.
# Environment (ctest): MINILST (the built program), MINILST_SOURCE, PYTHON.
set -euo pipefail
: "${MINILST:?the built program}" "${MINILST_SOURCE:?the source tree}"
python=${PYTHON:-/usr/bin/python3}
build=$(cd "$(dirname "$MINILST")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix data=$tmp/prefix/share/minilst
fail() { echo "install_tree: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }
for f in bin/minilst bin/minilst_bench_mst bin/minilst_bench_kernels share/minilst/inputs/tiny.yaml \
         share/minilst/scripts/run.sh share/minilst/scripts/lib/minilst_program.sh share/minilst/analysis/summarize.py \
         share/minilst/docs/install.md share/minilst/README.md share/minilst/RUN_RULES.md \
         lib/cmake/miniLST/miniLSTConfig.cmake lib/cmake/miniLST/miniLSTConfigVersion.cmake \
         lib/cmake/miniLST/miniLSTTargets.cmake; do
  [[ -e $prefix/$f ]] || fail "no $f in the install tree"
done
[[ -x $data/scripts/run.sh && -x $data/scripts/bench/step.sh ]] || fail "the installed scripts are not executable"
[[ -z $(find "$prefix" -name __pycache__) ]] || fail "__pycache__ installed"

# From here on nothing may reach the build tree or the checkout: a directory of our
# own, no MINILST, a BUILD_DIR that does not exist, no minilst on PATH.
mkdir -p "$tmp/work"
cd "$tmp/work"
unset MINILST MINILST_BIN_DIR RUNS_DIR
export BUILD_DIR=/nonexistent
! command -v minilst > /dev/null || fail "a minilst on PATH ($(command -v minilst)): the test cannot tell which one runs"

step "installed program, tiny deck, one rank without a launcher"
"$prefix/bin/minilst" run "$data/inputs/tiny.yaml" --set output.metrics="$tmp/x.h5" > "$tmp/run.log" 2>&1 \
  || { cat "$tmp/run.log"; fail "minilst run"; }
grep -q '^RESULT: VALID' "$tmp/run.log" || { cat "$tmp/run.log"; fail "no RESULT: VALID"; }
[[ -f $tmp/x.h5 ]] || fail "no metrics file $tmp/x.h5"

step "installed scripts find the installed program"
found=$(bash -c 'source "$1/scripts/lib/minilst_program.sh" && minilst_program "$1"' _ "$data") || fail "minilst_program"
[[ $found == "$prefix/bin/minilst" ]] || fail "minilst_program found '$found', not $prefix/bin/minilst"
"$data/scripts/reference_losses.sh" "$data/inputs/tiny.yaml" > "$tmp/ref.log" 2>&1 \
  || { cat "$tmp/ref.log"; fail "reference_losses.sh"; }
grep -q '^  losses: "' "$tmp/ref.log" || { cat "$tmp/ref.log"; fail "reference_losses.sh printed no losses"; }
NP=1 "$data/scripts/run.sh" "$data/inputs/tiny.yaml" > "$tmp/runsh.log" 2>&1 || { cat "$tmp/runsh.log"; fail "run.sh"; }
grep -q '^RESULT: VALID' "$tmp/runsh.log" || { cat "$tmp/runsh.log"; fail "run.sh: no RESULT: VALID"; }
grep -q 'setup:\|miniLST .*Kokkos' "$tmp/runsh.log" && fail "run.sh set up or built in an installed tree"
[[ -n $(find "$tmp/work/runs" -name '*.h5' 2> /dev/null) ]] || fail "run.sh wrote no metrics file under ./runs"
[[ ! -e $data/runs ]] || fail "run.sh wrote into the install tree ($data/runs)"

step "an external CMake project: find_package(miniLST 0.1), miniLST::minilst"
cmake -S "$MINILST_SOURCE/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  > "$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "the consumer's configure"; }
grep -q "miniLST::minilst = $prefix/bin/minilst" "$tmp/consumer.log" || { cat "$tmp/consumer.log"; fail "miniLST::minilst is not the installed program"; }
grep -q "miniLST_INPUTS_DIR = $data/inputs" "$tmp/consumer.log" || { cat "$tmp/consumer.log"; fail "miniLST_INPUTS_DIR"; }
cmake --build "$tmp/consumer" > "$tmp/consumer-build.log" 2>&1 || { cat "$tmp/consumer-build.log"; fail "the consumer's build"; }
grep -q '^minilst ' "$tmp/consumer/minilst_version.txt" || fail "the consumer's build did not run minilst --version"
(cd "$tmp/consumer" && ctest --output-on-failure > "$tmp/consumer-test.log" 2>&1) \
  || { cat "$tmp/consumer-test.log"; fail "the consumer's tests"; }
cat > "$tmp/version.cmake" <<CMAKE
set(PACKAGE_FIND_VERSION 1.0)
set(PACKAGE_FIND_VERSION_MAJOR 1)
include("$prefix/lib/cmake/miniLST/miniLSTConfigVersion.cmake")
message("compatible=\${PACKAGE_VERSION_COMPATIBLE}")
CMAKE
cmake -P "$tmp/version.cmake" 2>&1 | grep -q 'compatible=FALSE' || fail "find_package(miniLST 1.0) would accept 0.x"

step "the Spack recipe's check on the install tree"
PYTHONDONTWRITEBYTECODE=1 "$python" "$MINILST_SOURCE/tests/install/check_spack_recipe.py" \
  --source "$MINILST_SOURCE" --prefix "$prefix" > "$tmp/spack.log" 2>&1 || { cat "$tmp/spack.log"; fail "check_spack_recipe.py"; }
tail -n 1 "$tmp/spack.log"
echo "install_tree: all checks pass"
