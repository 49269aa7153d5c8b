#!/usr/bin/env python3
"""Count the lines of every function defined under src/ and fail on any longer than the limit.

A function's lines run from the first line of its signature (after any `template <...>`
line) to its closing brace, blank and comment lines included. Lambdas and local classes
count as part of the function that holds them. The C++ is read with a small scanner
(comments, string and character literals, raw strings and preprocessor lines set aside;
braces matched; a brace opens a function body where the text before it at namespace or
class scope has a parameter list and no `=`), which is enough for this code base and is
checked on a synthetic file by `--self-test`. Standard library only.

  scripts/check_function_length.py [--root DIR] [--limit 80] [--list N] [--self-test]

The kernels under kernels/ are outside this rule (docs/architecture.md: the documented
kernels keep a kernel's loop nest in one function).
"""
import argparse
import os
import re
import sys

SOURCE_EXTENSIONS = {".hpp", ".cpp", ".h", ".cc", ".cu", ".cuh"}
LITERAL = re.compile(r'R"([^(\s]*)\((?:.|\n)*?\)\1"|//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
SCOPE_KEYWORDS = re.compile(r"\b(namespace|class|struct|union|enum)\b")


def blank_literals(text):
    """The text with comments, literals and preprocessor lines replaced by spaces (newlines kept)."""
    def blank(match):
        s = match.group(0)
        keep = "" if s.startswith(("//", "/*")) else s[0]
        return keep + re.sub(r"[^\n]", " ", s[len(keep):])
    text = LITERAL.sub(blank, text)
    lines = text.split("\n")
    in_directive = False
    for i, line in enumerate(lines):
        if in_directive or line.lstrip().startswith("#"):
            in_directive = line.rstrip().endswith("\\")
            lines[i] = ""
    return "\n".join(lines)


def strip_template_heads(header):
    """`template <class T, ...>` prefixes removed (their `class` is not a class scope)."""
    while True:
        m = re.match(r"\s*template\s*<", header)
        if not m:
            return header
        depth, i = 1, m.end()
        while i < len(header) and depth:
            depth += {"<": 1, ">": -1}.get(header[i], 0)
            i += 1
        header = header[i:]


def classify(header):
    """What a `{` opens, from the text before it at namespace or class scope."""
    h = strip_template_heads(header).strip()
    paren = h.find("(")
    before_paren = h if paren < 0 else h[:paren]
    m = SCOPE_KEYWORDS.search(before_paren)
    if m:
        return "scope" if m.group(1) in ("namespace", "class", "struct", "union") else "other"
    if h.startswith("extern"):
        return "scope"
    depth, top_level_eq = 0, False
    for ch in h:  # an `=` outside brackets: an initializer (a lambda's body included), not a definition
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if ch == "=" and depth == 0:
            top_level_eq = True
    if top_level_eq or paren < 0:
        return "other"
    if re.search(r"\)\s*(const\s*)?(noexcept\s*)?:[^{}]*[\w>]\s*$", h) and not h.rstrip().endswith(")"):
        return "member_init"  # `A::A(int v) : w_{v}`: a member's brace initializer, the body follows
    return "function"


def functions(text):
    """(name, first line, last line) of each function defined in the text (lines 1-based)."""
    code = blank_literals(text)
    stack = []  # (kind, start line, name)
    header_start = 0  # offset where the text before the next brace begins
    line_of = [0] * (len(code) + 1)
    line = 1
    for i, ch in enumerate(code):
        line_of[i] = line
        if ch == "\n":
            line += 1
    out = []
    for i, ch in enumerate(code):
        if ch not in "{};":
            continue
        inside_function = any(kind in ("function", "body") for kind, _, _ in stack)
        if ch == ";":
            if not inside_function:
                header_start = i + 1
            continue
        if ch == "{":
            if inside_function:
                stack.append(("body", 0, ""))
                continue
            header = code[header_start:i]
            kind = classify(header)
            if kind == "function":
                h = strip_template_heads(header)
                offset = header_start + (len(header) - len(h)) + (len(h) - len(h.lstrip()))
                name = re.findall(r"([~\w:<>]+)\s*\(", h)
                stack.append(("function", line_of[offset], name[0] if name else "?"))
            else:
                stack.append((kind, 0, ""))
            if kind != "member_init":
                header_start = i + 1
            continue
        if not stack:
            header_start = i + 1
            continue
        kind, start, name = stack.pop()
        if kind == "function":
            out.append((name, start, line_of[i]))
        if kind != "member_init" and not any(k in ("function", "body") for k, _, _ in stack):
            header_start = i + 1
    return out


def self_test():
    sample = """
namespace a {
template <class T>
struct S {
  int f(int x) const {
    return x;  // }
  }
};
const char* s = "{ not a brace";
static const int table[] = {1, 2, 3};
int g(int y)
{
  auto l = [&](int z) { return z + y; };
  if (y) { return l(y); }
  return 0;
}
A::A(int v) : v_(v), w_{v} {
  run();
}
}  // namespace a
"""
    got = [(n, a, b) for n, a, b in functions(sample)]
    want = [("f", 5, 7), ("g", 11, 16), ("A::A", 17, 19)]
    if got != want:
        print("self-test FAILED: got", got, "want", want)
        return 1
    print("self-test passed:", got)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--limit", type=int, default=80)
    ap.add_argument("--list", type=int, default=0, help="print the N longest functions")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    rows = []
    src = os.path.join(args.root, "src")
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for f in sorted(filenames):
            if os.path.splitext(f)[1] not in SOURCE_EXTENSIONS:
                continue
            path = os.path.join(dirpath, f)
            with open(path, encoding="utf-8", errors="replace") as fh:
                for name, a, b in functions(fh.read()):
                    rows.append((b - a + 1, os.path.relpath(path, args.root), a, name))
    rows.sort(reverse=True)
    over = [r for r in rows if r[0] > args.limit]
    for n, path, line, name in rows[: max(args.list, 0)]:
        print(f"{n:5d}  {path}:{line}  {name}")
    for n, path, line, name in over:
        print(f"error: {path}:{line}: {name} is {n} lines (the limit is {args.limit})")
    print(f"{len(rows)} functions under src/, the longest {rows[0][0] if rows else 0} lines; {len(over)} over {args.limit}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
