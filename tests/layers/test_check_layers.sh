#!/usr/bin/env bash
# The layer checker's own test: a small synthetic tree, clean and then broken one way at a time.
#   tests/layers/test_check_layers.sh [PYTHON] [CHECKER]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${1:-python3}
checker=${2:-$here/../../scripts/check_layers.py}
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT

# A clean tree: kernels < core < memory < model < app, with a generated and a system header.
clean_tree() {
  rm -rf "${tree:?}"/*
  mkdir -p "$tree"/kernels "$tree"/src/{core,memory,model,app}
  printf '#pragma once\n' > "$tree/kernels/types.hpp"
  printf '#include "types.hpp"\n' > "$tree/kernels/gemm.hpp"
  printf '#  include "kernels/types.hpp"\n' > "$tree/src/core/config.hpp"
  printf '#include "core/config.hpp"\n#include <vector>\n' > "$tree/src/memory/a.hpp"
  printf '#include "memory/a.hpp"\n#include "kernels/gemm.hpp"\n' > "$tree/src/model/b.hpp"
  printf '#include "model/b.hpp"\n#include "minilst_git.hpp"\nint main() {}\n' > "$tree/src/app/main.cpp"
}

# expect CODE TEXT: the checker exits with CODE and prints a line containing TEXT.
expect() {
  local rc=0 out
  out=$("$python" "$checker" --root "$tree" 2>&1) || rc=$?
  if [[ $rc != "$1" ]] || ! grep -qF -- "$2" <<<"$out"; then
    echo "FAIL ($case): expected exit $1 and '$2', got exit $rc:"; echo "$out"; exit 1
  fi
  echo "ok ($case)"
}

case="clean tree"; clean_tree
expect 0 "layers: OK (6 files, 5 includes across folders; order kernels < core < memory"

case="upward include"; clean_tree
printf '#include "model/b.hpp"\n' >> "$tree/src/memory/a.hpp"
expect 1 "src/memory/a.hpp:3: memory includes model/b.hpp (a floor above it: model)"

case="cycle between two folders"; clean_tree
printf '#include "memory/a.hpp"\n' > "$tree/src/core/c.hpp"
expect 1 "cycle: core <-> memory (src/core/c.hpp:1 includes memory/a.hpp; src/memory/a.hpp:1 includes core/config.hpp)"

case="two files of one folder including each other (header and source as one)"; clean_tree
printf '#pragma once\n' > "$tree/src/model/c.hpp"
printf '#include "model/c.hpp"\n' > "$tree/src/model/b.cpp"
printf '#include "model/c.hpp"\n#include "model/b.hpp"\n' > "$tree/src/model/c.cpp"
expect 1 "file cycle: src/model/b -> src/model/c -> src/model/b (src/model/b.cpp:1 includes model/c.hpp; src/model/c.cpp:2 includes model/b.hpp)"

case="a loop of three files across folders"; clean_tree
printf '#include "model/b.hpp"\n' > "$tree/src/app/x.cpp"
printf '#include "app/main.cpp"\n' > "$tree/src/app/x.hpp"
printf '#include "app/x.hpp"\n' > "$tree/src/app/y.cpp"
printf '#pragma once\n' > "$tree/src/app/y.hpp"
printf '#include "app/y.hpp"\n' >> "$tree/src/app/main.cpp"
printf '#include "app/x.hpp"\n' > "$tree/src/app/y.hpp"
expect 1 "file cycle: src/app/main -> src/app/y -> src/app/x -> src/app/main"

case="folder with no floor"; clean_tree
mkdir -p "$tree/src/extra" && printf '#pragma once\n' > "$tree/src/extra/e.hpp"
expect 1 "folder extra has no floor: add it to the order"

case="unresolvable include"; clean_tree
printf '#include "model/bb.hpp"\n' >> "$tree/src/app/main.cpp"
expect 1 "src/app/main.cpp:4: cannot resolve include \"model/bb.hpp\""

case="includes in comments"; clean_tree
printf '// #include "model/b.hpp"\n/* a note\n#include "app/main.cpp"\n*/ int x;\n' >> "$tree/src/memory/a.hpp"
expect 0 "layers: OK"

case="a string with /* opens no comment"; clean_tree
printf 'const char* glob = "src/*.cpp";\n#include "model/b.hpp"\n' >> "$tree/src/memory/a.hpp"
expect 1 "src/memory/a.hpp:4: memory includes model/b.hpp"

echo "layers checker: all cases passed"
