# shellcheck shell=bash
# Sourced by the scripts: where the miniLST program is, whether the scripts run from
# a source checkout or an installed tree, and where runs go.
#
# ROOT is the scripts' root, root=$(cd "$(dirname "$0")/.." && pwd): a source checkout,
# or PREFIX/share/minilst in a tree installed by `cmake --install` (or Spack).

# minilst_checkout ROOT: true in a source checkout (the scripts may set up and build
# there), false in an installed tree (the program is installed; nothing to build).
minilst_checkout() {
  [[ -f $1/CMakeLists.txt ]]
}

# minilst_program ROOT prints the miniLST program the scripts run, the first of:
#   $MINILST                          a path given by the user;
#   ROOT/${BUILD_DIR:-build}/minilst  the build tree of a source checkout (BUILD_DIR may be absolute);
#   ROOT/../../bin/minilst            in an installed tree (ROOT = PREFIX/share/minilst);
#   minilst on PATH                   (a module, a Spack environment, `spack load minilst`).
# With none, it says what it looked for and returns 1.
minilst_program() {
  local root=$1 build=${BUILD_DIR:-build}
  [[ $build == /* ]] || build=$root/$build
  if [[ -n ${MINILST:-} ]]; then
    [[ -f $MINILST && -x $MINILST ]] || { echo "MINILST=$MINILST is not an executable" >&2; return 1; }
    echo "$(cd "$(dirname "$MINILST")" && pwd)/$(basename "$MINILST")"  # absolute: scripts change directory
  elif [[ -f $build/minilst && -x $build/minilst ]]; then
    echo "$build/minilst"
  elif ! minilst_checkout "$root" && [[ -f $root/../../bin/minilst && -x $root/../../bin/minilst ]]; then
    echo "$(cd "$root/../../bin" && pwd)/minilst"
  elif command -v minilst > /dev/null 2>&1; then
    command -v minilst
  else
    echo "no miniLST program: not \$MINILST, not $build/minilst (build it: scripts/build.sh)," \
         "not an installed one beside the scripts (PREFIX/bin/minilst), not on PATH" >&2
    return 1
  fi
}

# minilst_runs_dir ROOT prints the directory runs go in: $RUNS_DIR where set, else
# ROOT/runs in a source checkout, ./runs (under the current directory) in an installed
# tree, which is shared and may be read-only.
minilst_runs_dir() {
  if [[ -n ${RUNS_DIR:-} ]]; then
    echo "$RUNS_DIR"
  elif minilst_checkout "$1"; then
    echo "$1/runs"
  else
    echo "$PWD/runs"
  fi
}
