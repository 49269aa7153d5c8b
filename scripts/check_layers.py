#!/usr/bin/env python3
"""Check that the source folders form a house of floors.

A file may include files of its own folder or of floors below it, never of a
floor above; no two folders may include each other. Standard library only.

  scripts/check_layers.py [--root DIR] [--graph]
"""
import argparse
import os
import re
import sys

# The floors, bottom up. kernels/ is at the repository root; the rest are under src/.
FLOORS = [
    "kernels",    # the math
    "core",       # shared vocabulary: configs, options and policy enums with names, ranges, batch, phase names and timers
    "memory",     # tracked allocation, arena and planner, activation store and its offload controller, copy engines
    "parallel",   # communicators, sequence layout
    "attention",  # the attention strategies, their factory, the ring pass
    "model",      # parameters, layers, model, trainer, memory and communication models
    "io",         # deck, HDF5 metrics, tensor dump, provenance
    "app",        # the program: command line, step loop, stopping, plan
    "bench",      # benchmark programs
]
FLOOR = {name: level for level, name in enumerate(FLOORS)}

# Headers written into <build>/generated at configure time, never in the tree.
GENERATED = {"minilst_git.hpp", "minilst_build_info.hpp"}

SOURCE_EXTENSIONS = {".h", ".hh", ".hpp", ".hxx", ".inl", ".ipp", ".tpp",
                     ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh"}

# Comments (replaced by blank lines) and string/char literals (kept, so "a/*b" opens no comment).
COMMENT_OR_LITERAL = re.compile(
    r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)')


def strip_comments(text):
    """The text with comments blanked out, line numbers unchanged."""
    def blank(match):
        s = match.group(0)
        return "\n" * s.count("\n") if s.startswith("/") else s
    return COMMENT_OR_LITERAL.sub(blank, text)


def folder_of(relpath):
    """The floor folder a repository-relative path belongs to, or None."""
    parts = relpath.split("/")
    if parts[0] == "kernels" and len(parts) > 1:
        return "kernels"
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    return None


def source_files(root):
    """Repository-relative paths of the source files under kernels/ and src/."""
    for top in ("kernels", "src"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if os.path.splitext(name)[1] in SOURCE_EXTENSIONS:
                    yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def resolve(root, including, target, quoted):
    """The repository-relative file an include names, or None (as the compiler searches:
    the including file's folder for quoted includes, then <root>, then <root>/src)."""
    bases = [os.path.dirname(including)] if quoted else []
    for base in bases + ["", "src"]:
        path = os.path.normpath(os.path.join(root, base, target))
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        if os.path.isfile(path) and not rel.startswith("../"):
            return rel
    return None


def main():
    default_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description="Check the include order of the source folders.")
    parser.add_argument("--root", default=default_root, help="repository root (default: %(default)s)")
    parser.add_argument("--graph", action="store_true", help="also print the folder-level include graph")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    if not os.path.isdir(os.path.join(root, "src")):
        print(f"layers: no src/ folder under {root}")
        return 2

    errors = []
    # Every folder under src/ must have a floor.
    for name in sorted(os.listdir(os.path.join(root, "src"))):
        if os.path.isdir(os.path.join(root, "src", name)) and not name.startswith(".") and name not in FLOOR:
            errors.append(f"src/{name}: folder {name} has no floor: add it to the order")

    edges = {}     # (from folder, to folder) -> list of "file:line includes target"
    files = 0
    for rel in source_files(root):
        folder = folder_of(rel)
        if folder is None:
            errors.append(f"{rel}: file is in no folder: move it into one of the floors")
            continue
        if folder not in FLOOR:
            continue  # already reported as a folder with no floor
        files += 1
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            lines = strip_comments(f.read()).split("\n")
        for number, line in enumerate(lines, 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            quoted = match.group(1) is not None
            target = match.group(1) if quoted else match.group(2)
            found = resolve(root, rel, target, quoted)
            if found is None:
                if quoted and target not in GENERATED:
                    errors.append(f"{rel}:{number}: cannot resolve include \"{target}\"")
                continue  # a generated or a system header
            to = folder_of(found)
            if to not in FLOOR or to == folder:
                continue  # outside the floors, or within the folder
            edges.setdefault((folder, to), []).append(f"{rel}:{number} includes {target}")
            if FLOOR[to] > FLOOR[folder]:
                errors.append(f"{rel}:{number}: {folder} includes {target} (a floor above it: {to})")

    # Two folders that include each other.
    for (a, b), sites in sorted(edges.items(), key=lambda e: (FLOOR[e[0][0]], FLOOR[e[0][1]])):
        if FLOOR[a] < FLOOR[b] and (b, a) in edges:
            errors.append(f"cycle: {a} <-> {b} ({sites[0]}; {edges[(b, a)][0]})")

    if args.graph:
        print("folder include graph (from -> to: includes):")
        for (a, b), sites in sorted(edges.items(), key=lambda e: (FLOOR[e[0][0]], FLOOR[e[0][1]])):
            note = "  (upward)" if FLOOR[b] > FLOOR[a] else ""
            print(f"  {a} -> {b}: {len(sites)}{note}")

    crossing = sum(len(sites) for sites in edges.values())
    order = " < ".join(FLOORS)
    if errors:
        for error in errors:
            print(error)
        noun = "violation" if len(errors) == 1 else "violations"
        print(f"layers: FAILED ({len(errors)} {noun} in {files} files, "
              f"{crossing} includes across folders; order {order})")
        return 1
    print(f"layers: OK ({files} files, {crossing} includes across folders; order {order})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
