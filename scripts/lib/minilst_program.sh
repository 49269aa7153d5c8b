# Sourced by the scripts. minilst_program ROOT prints the miniLST program the
# scripts run, the first of:
#   $MINILST                          a path given by the user;
#   ROOT/${BUILD_DIR:-build}/minilst  the build tree of a source checkout (ROOT = the checkout);
#   ROOT/../../bin/minilst            an installed tree (ROOT = PREFIX/share/minilst);
#   minilst on PATH                   (a module or a Spack environment).
# With none, it says what it looked for and returns 1.
minilst_program() {
  local root=$1 build=${BUILD_DIR:-build} found=""
  if [[ -n ${MINILST:-} ]]; then
    [[ -x $MINILST ]] || { echo "MINILST=$MINILST is not an executable" >&2; return 1; }
    found=$MINILST
  elif [[ $build == /* && -x $build/minilst ]]; then
    found=$build/minilst
  elif [[ -x $root/$build/minilst ]]; then
    found=$root/$build/minilst
  elif [[ -x $root/../../bin/minilst && -f $root/../../bin/minilst ]]; then
    found=$(cd "$root/../../bin" && pwd)/minilst
  elif command -v minilst > /dev/null 2>&1; then
    found=$(command -v minilst)
  else
    echo "no miniLST program: not \$MINILST, not $root/$build/minilst (build it: scripts/build.sh)," \
         "not an installed $root/../../bin/minilst, not on PATH" >&2
    return 1
  fi
  echo "$found"
}
