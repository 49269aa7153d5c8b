#!/usr/bin/env python3
"""Check that the source folders form a house of floors.

A file may include files of its own folder or of floors below it, never of a
floor above; no two folders may include each other; and no two files include
each other, directly or around a loop (a header and its .cpp count as one file,
so x.cpp including y.hpp and y.cpp including x.hpp is such a loop). Standard
library only.

  scripts/check_layers.py [--root DIR] [--graph]
"""
import argparse
import os
import re
import sys

# The floors, bottom up. kernels/ is at the repository root; the rest are under src/.
FLOORS = [
    "kernels",    # the math, and the KernelChoice every call is given
    "core",       # shared vocabulary: configs, options and policy enums with names, the kernel choice's resolution, ranges, batch, phase names and timers, the number rules of text files
    "memory",     # tracked allocation, arena and planner, activation store and its offload controller, copy engines
    "parallel",   # communicators, sequence layout
    "attention",  # the attention strategies, their factory, the ring pass
    "model",      # parameters, layers, model, trainer
    "io",         # deck, HDF5 writer, tensor dump, atomic file writes, one rule for input files
    "predict",    # FLOPs, memory, communication and time models; the plan of a deck, the fit check, the layout search; machine files; device facts; a run's one prediction
    "job",        # batch-job duties: stop, watchdog, job clock, agreement (command line, deck, kernels), machine, subprocess, Kokkos flags, energy, step guard
    "results",    # what a run reports: metrics file, recorder, run record, run rules, JSON summary, MLPerf lines, provenance, report, the Run around the step loop
    "app",        # the program: main, command line, the model's parts (training), step loop, plan
    "bench",      # benchmark programs
]
FLOOR = {name: level for level, name in enumerate(FLOORS)}

# Headers written into <build>/generated at configure time, never in the tree.
GENERATED = {"minilst_git.hpp", "minilst_build_info.hpp", "minilst_shipped_decks.hpp"}

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


def unit_cycles(edges):
    """One loop through each group of files that include each other (strongly connected
    components of more than one file, Tarjan's algorithm), as a list of units."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(set(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    loops = []
    for group in groups:  # a shortest loop from the group's first unit back to itself, within the group
        start = min(group)
        paths, seen = [[start]], {start}
        while paths:
            path = paths.pop(0)
            nxt = [w for w in sorted(graph[path[-1]]) if w in group]
            if start in nxt:
                loops.append(path)
                break
            for w in nxt:
                if w not in seen:
                    seen.add(w)
                    paths.append(path + [w])
    return sorted(loops)


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
    unit_edges = {}  # (from unit, to unit) -> "file:line includes target"; a unit is a path without its extension
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
            here, there = os.path.splitext(rel)[0], os.path.splitext(found)[0]
            if here != there:
                unit_edges.setdefault((here, there), f"{rel}:{number} includes {target}")
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

    # Files that include each other, directly or around a loop.
    for loop in unit_cycles(unit_edges):
        sites = "; ".join(unit_edges[(loop[i], loop[(i + 1) % len(loop)])] for i in range(len(loop)))
        errors.append(f"file cycle: {' -> '.join(loop + [loop[0]])} ({sites})")

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
