#!/usr/bin/env python3
"""Every script the README and docs/ call directly runs as written: it is executable
in git (mode 100755, what a fresh clone gets) and starts with a '#!' line.

A script (.sh, .py) is called directly when its path stands in command position in
a code block, or an inline code span of more than one word, of README.md or docs/*.md: first on a line or after
';', '&&', '||', '|', '(' or '$ ', after any VAR=value words and the wrappers
time, env, nohup, srun, mpirun (and their options). A path after an interpreter
(`bash scripts/x.sh`, `python3 analysis/y.py`) or after `source` needs neither.

    tests/app/script_modes.py [REPO]        exit 0: all hold; 1: each offender named
"""
import os
import pathlib
import re
import subprocess
import sys

WRAPPERS = {"time", "env", "nohup", "srun", "mpirun", "mpiexec", "exec", "timeout", "sudo"}
SEPARATORS = re.compile(r"&&|\|\||[;|(]|\$\(|`")


def tracked_modes(repo):
    """{path: git mode} of every tracked file; outside a git checkout (an unpacked
    release), every file with the mode its run bit gives."""
    listing = subprocess.run(["git", "-C", str(repo), "ls-files", "-s"], capture_output=True, text=True)
    if listing.returncode != 0 or not listing.stdout:
        return {p.relative_to(repo).as_posix(): "100755" if os.access(p, os.X_OK) else "100644"
                for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    out = listing.stdout
    modes = {}
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        modes[path] = meta.split()[0]
    return modes


def code_texts(markdown):
    """The lines of fenced code blocks, and the inline code spans that hold a command
    (more than one word: a span holding a path alone names a file, it calls nothing)."""
    texts, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            texts.append(line.split(" #", 1)[0])
        else:
            texts.extend(span for span in re.findall(r"`([^`]+)`", line) if len(span.split()) > 1)
    return texts


def commands(text):
    """The words in command position of one line of shell."""
    text = re.sub(r"^\s*\$\s+", "", text)
    for segment in SEPARATORS.split(text):
        words = segment.split()
        while words and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] in WRAPPERS):
            wrapper = words.pop(0)
            if wrapper in WRAPPERS:  # skip the wrapper's options and their values (-n 4, -t 60 ...)
                while words and words[0].startswith("-"):
                    option = words.pop(0)
                    if "=" not in option and words and re.match(r"^[0-9]+[smh]?$", words[0]):
                        words.pop(0)
                if wrapper == "timeout" and words and re.match(r"^[0-9]+[smh]?$", words[0]):
                    words.pop(0)
        if words:
            yield words[0]


def offenders(repo):
    repo = pathlib.Path(repo).resolve()
    modes = tracked_modes(repo)
    documents = [repo / "README.md"] + sorted((repo / "docs").rglob("*.md"))
    found = {}
    for doc in documents:
        for text in code_texts(doc.read_text(encoding="utf-8")):
            for word in commands(text):
                path = word[2:] if word.startswith("./") else word
                if path in modes and re.search(r"\.(sh|py)$", path):
                    found.setdefault(path, doc.relative_to(repo).as_posix())
    problems = []
    for path, doc in sorted(found.items()):
        if modes[path] != "100755":
            problems.append(f"{path} (called in {doc}): git mode {modes[path]}, not 100755 (git update-index --chmod=+x)")
        with open(repo / path, "rb") as f:
            if f.read(2) != b"#!":
                problems.append(f"{path} (called in {doc}): no '#!' line")
    return found, problems


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2]
    found, problems = offenders(repo)
    for p in problems:
        print("script_modes:", p)
    if not found:
        print("script_modes: no script called in README.md or docs/ (the reader found nothing: broken?)")
        return 1
    print(f"script_modes: {len(found)} scripts called directly in the docs, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
