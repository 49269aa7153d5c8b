#!/usr/bin/env bash
# scripts/gpu/check_bundle.py on bundles made here from this host's programs: a bundle
# missing a library fails naming it; a program whose run path points at the build
# machine fails; one whose libraries are all inside (RUNPATH $ORIGIN/../lib) passes;
# one over the size limit fails. Environment (ctest): MINILST_SOURCE.
source "$(dirname "$0")/../app/common.sh"
checker=$MINILST_SOURCE/scripts/gpu/check_bundle.py
command -v patchelf > /dev/null || { echo "patchelf missing (scripts/setup.sh)"; exit 1; }
expect() {  # expect RC TEXT BUNDLE [ARGS]: the checker exits RC and prints TEXT
  local rc=0 out
  out=$(python3 "$checker" "${@:3}" 2>&1) || rc=$?
  if [[ $rc != "$1" ]] || ! grep -qF -- "$2" <<< "$out"; then echo "FAIL: expected rc $1 and '$2', got rc $rc:"; echo "$out"; exit 1; fi
  echo "ok: $2"
}
# A program that needs yaml-cpp (the smallest library the real bundle ships), alone.
cat > prog.cpp <<'CPP'
#include <yaml-cpp/yaml.h>
int main() { return YAML::Load("a: 1")["a"].as<int>() - 1; }
CPP
c++ prog.cpp -o prog -lyaml-cpp
mkdir -p b/bin b/lib
cp prog b/bin/prog
patchelf --set-rpath '$ORIGIN/../lib' b/bin/prog
expect 1 "bin/prog needs libyaml-cpp.so" b
lib=$(ldd prog | awk '/libyaml-cpp/ { print $3 }')
cp -L "$lib" "b/lib/$(basename "$lib")"
patchelf --set-rpath '$ORIGIN' "b/lib/$(basename "$lib")"
expect 0 "PASSED" b
b/bin/prog  # runs from the bundle
patchelf --set-rpath /usr/lib/x86_64-linux-gnu b/bin/prog
expect 1 "RUNPATH is '/usr/lib/x86_64-linux-gnu'" b
patchelf --set-rpath '$ORIGIN/../lib' b/bin/prog
expect 1 "more than 0.001 MiB" b --max-mib 0.001
mkdir -p c/bin
expect 1 "no program in bin/ or tests/" c
