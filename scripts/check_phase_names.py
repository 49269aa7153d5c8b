#!/usr/bin/env python3
"""Check that no timed phase's name is written as a string literal outside its one table.

The phases are the enum `Phase` of src/core/phases.hpp; their names are its `EnumNames<Phase>`
table, and every reader (the metrics file, the summary, the time model, `minilst plan`, probe)
goes through `name_of(Phase::...)`, so a misspelt phase does not compile. This script reads the
table and fails on any string literal under src/ or kernels/ that equals a phase name, except

  - inside another enum's name table (`struct EnumNames<...> { ... }`): a word two enums share,
    such as the comm operation "alltoall" or the step_scale family "attention", and
  - the uses listed in ALLOWED below, each with why the word is not a phase there.

It also checks that analysis/ reads the phases from the metrics file (its `phases` attribute)
rather than retyping the list. Standard library only.

  scripts/check_phase_names.py [--root DIR] [--self-test]
"""
import argparse
import os
import re
import sys

# (file, literal): why that literal is not a phase's name there.
ALLOWED = {
    ("src/model/parameters.cpp", "lm_head"): "a parameter's name (the tensor dump's, DESIGN 4.3)",
    ("src/bench/kernels_bench.cpp", "attention"): "the benchmark program's subcommand",
    ("src/bench/mst_blocks.cpp", "mlp"): "the MsT benchmark's block name (its JSON)",
    ("src/bench/mst_blocks.cpp", "lm_head"): "the MsT benchmark's block name (its JSON)",
    ("src/app/driver.cpp", "step"): "the Kokkos Tools region around the whole step, beside the timers",
    ("src/results/run_record.cpp", "attention"): "the metrics file's attribute naming the attention strategy",
    ("src/results/json_summary.cpp", "attention"): "the JSON summary's key for the attention strategy",
    ("src/memory/tracker.cpp", "optimizer"): "a memory category's name (its own table)",
    ("src/memory/tracker.cpp", "comm"): "a memory category's name (its own table)",
    ("kernels/attention_tensor_core.cpp", "forward"): "a CUDA kernel's label in an error message",
}

LITERAL = re.compile(r'"((?:\\.|[^"\\\n])*)"')
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
TABLE = re.compile(r"struct\s+EnumNames<\s*(\w+)\s*>\s*\{(.*?)\n\};", re.S)


def phase_names(root):
    text = open(os.path.join(root, "src/core/phases.hpp"), encoding="utf-8").read()
    for enum, body in TABLE.findall(text):
        if enum == "Phase":
            return [m.group(1) for m in LITERAL.finditer(body)]
    raise SystemExit("check_phase_names: no EnumNames<Phase> table in src/core/phases.hpp")


def literal_uses(text, names):
    """(line, literal) of each literal equal to a phase name outside another enum's name table."""
    code = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    tables = [(m.start(), m.end()) for m in TABLE.finditer(code)]
    out = []
    for m in LITERAL.finditer(code):
        if m.group(1) in names and not any(a <= m.start() < b for a, b in tables):
            out.append((code.count("\n", 0, m.start()) + 1, m.group(1)))
    return out


def check(root):
    names = set(phase_names(root))
    problems = []
    for top in ("src", "kernels"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for f in sorted(filenames):
                if os.path.splitext(f)[1] not in (".hpp", ".cpp", ".h", ".cu", ".cuh"):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                if rel == "src/core/phases.hpp":
                    continue
                for line, word in literal_uses(open(path, encoding="utf-8", errors="replace").read(), names):
                    if (rel, word) not in ALLOWED:
                        problems.append(f'{rel}:{line}: "{word}" is a phase\'s name: write name_of(Phase::{word})')
    # analysis/: the full list is the metrics file's (`phases`), never retyped
    listed = re.compile(r'\(\s*"step"\s*,\s*"forward"|\[\s*"forward"\s*,\s*"backward"\s*,\s*"attention"')
    adir = os.path.join(root, "analysis")
    for f in sorted(os.listdir(adir)) if os.path.isdir(adir) else []:
        if f.endswith(".py") and listed.search(open(os.path.join(adir, f), encoding="utf-8").read()):
            problems.append(f"analysis/{f}: retypes the list of phases: read it from the metrics file "
                            "(minilst_metrics.phases)")
    return names, problems


def self_test():
    names = {"attention", "step"}
    sample = ('struct EnumNames<Other> {\n  static constexpr table{{{Other::a, "attention"}}};\n};\n'
              'x["attention"] = 1;  // "step" in a comment\nconst char* s = "steps";\n')
    got = literal_uses(sample, names)
    if got != [(4, "attention")]:
        print("self-test FAILED:", got)
        return 1
    print("self-test passed:", got)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    names, problems = check(args.root)
    for p in problems:
        print("error:", p)
    print(f"phase names: {len(names)} in src/core/phases.hpp; {len(problems)} written elsewhere")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
