#!/usr/bin/env python3
"""The JUBE benchmark's check of one run (benchmarks/jube/minilst.yaml): its RESULT line against this system's
reference (references.tsv). Prints one line and exits 0 (PASS) or 1 (FAIL):

    CHECK: PASS verdict=VALID fom=F reference=R tolerance=T floor=R*(1-T)
    CHECK: FAIL reference=R floor=X: why

FAIL where the log has no RESULT line (the run did not finish or was refused), the verdict is not VALID
(INVALID: a loss off the deck's reference answer or not finite; INCOMPLETE: stopped early), the system has no
reference for the deck, ranks and layout, or the figure of merit (FOM, tokens/s per rank) is below the reference
by more than its tolerance: FOM < reference x (1 - tolerance).

references.tsv: whitespace-separated columns system deck ranks layout fom tolerance, then a free note (the
machine and the command that measured it); '#' starts a comment. Standard library only.
"""
import argparse
import re
import sys

RESULT = re.compile(r"^RESULT: (VALID|INVALID|INCOMPLETE)\b.* FOM=([-+0-9.eE]+|nan|inf)")


def read_references(path):
    """(system, deck, ranks, layout) -> (fom, tolerance, line number); a malformed row is an error naming it."""
    refs = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            try:
                system, deck, ranks, layout, fom, tol = words[:6]
                key, value = (system, deck, int(ranks), layout), (float(fom), float(tol), n)
            except ValueError:
                raise SystemExit(f"{path}:{n}: expected 'system deck ranks layout fom tolerance [note]', got {line.strip()!r}")
            if not (value[0] > 0 and 0 <= value[1] < 1):
                raise SystemExit(f"{path}:{n}: fom must be > 0 and tolerance in [0, 1): {line.strip()!r}")
            if key in refs:
                raise SystemExit(f"{path}:{n}: {key} is listed twice (line {refs[key][2]})")
            refs[key] = value
    return refs


def last_result(log):
    """(verdict, fom) of the log's last RESULT line, or None."""
    found = None
    try:
        with open(log, errors="replace") as f:
            for line in f:
                m = RESULT.match(line)
                if m:
                    found = (m.group(1), float(m.group(2)))
    except OSError:
        return None
    return found


def check(args):
    """(passed, line)."""
    refs = read_references(args.references)
    ref = refs.get((args.system, args.deck, args.ranks, args.layout))
    where = f"reference={ref[0]:g} floor={ref[0] * (1 - ref[1]):g}" if ref else "reference=none floor=none"
    result = last_result(args.log)
    if result is None:
        return False, f"CHECK: FAIL {where}: no RESULT line in {args.log} (the run did not finish; see it and job.out)"
    verdict, fom = result
    if verdict != "VALID":
        return False, f"CHECK: FAIL {where}: verdict {verdict} (fom {fom:g})"
    if ref is None:
        return False, (f"CHECK: FAIL {where}: no reference for system {args.system}, deck {args.deck}, "
                       f"{args.ranks} ranks, layout {args.layout} in {args.references}")
    floor = ref[0] * (1 - ref[1])
    if not fom >= floor:
        return False, (f"CHECK: FAIL {where}: FOM {fom:g} below the reference {ref[0]:g} by more than its tolerance "
                       f"{ref[1]:g} (floor {floor:g}; line {ref[2]})")
    return True, f"CHECK: PASS verdict={verdict} fom={fom:g} {where} tolerance={ref[1]:g}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log", required=True, help="the run's output (minilst.log)")
    p.add_argument("--references", required=True, help="references.tsv")
    p.add_argument("--system", required=True)
    p.add_argument("--deck", required=True, help="the shipped deck's name (inputs/<deck>.yaml)")
    p.add_argument("--ranks", required=True, type=int)
    p.add_argument("--layout", required=True, choices=["local", "ulysses", "ring", "hybrid"])
    ok, line = check(p.parse_args())
    print(line)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
