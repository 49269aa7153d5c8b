#!/usr/bin/env python3
"""benchmarks/reframe/minilst_check.py can fail: its hooks run under a stand-in for the part of
ReFrame's API the file uses (ReFrame is not packaged for Debian), and its performance reference is
looked up as ReFrame looks one up: 'system:partition', then 'system', then '*' (ReFrame's scoped
reference dictionary); a variable found under none of them is not checked. A FOM below a reference
no machine reaches fails; one above a reachable reference passes; a system the references do not
list is not checked; the key the file used to write ('system:*') is shown to be found by no lookup.

    /usr/bin/python3 tests/analysis/reframe_check.py
"""
import importlib.util
import os
import re
import sys
import tempfile
import types

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def install_stand_in():
    """The ReFrame names the check imports: decorators that mark hooks, parameters and variables
    whose values the instance is given, and the two sanity functions it calls (on a file's text)."""
    rfm = types.ModuleType("reframe")
    rfm.simple_test = lambda cls: cls
    rfm.RunOnlyRegressionTest = type("RunOnlyRegressionTest", (), {})
    builtins = types.ModuleType("reframe.core.builtins")
    hook = lambda when: (lambda stage: (lambda f: setattr(f, "_hook", (when, stage)) or f))
    builtins.run_after, builtins.run_before = hook("after"), hook("before")
    builtins.parameter = lambda values: list(values)
    builtins.variable = lambda typ, value=None: value
    builtins.sanity_function = lambda f: setattr(f, "_sanity", True) or f
    builtins.performance_function = lambda unit: (lambda f: setattr(f, "_perf_unit", unit) or f)
    sanity = types.ModuleType("reframe.utility.sanity")

    def extractsingle(pattern, path, tag, conv=str):
        with open(path) as f:
            m = re.search(pattern, f.read(), re.MULTILINE)
        if not m:
            raise AssertionError(f"sanity: no match for {pattern!r}")
        return conv(m.group(tag))

    def assert_eq(a, b):
        if a != b:
            raise AssertionError(f"sanity: {a!r} != {b!r}")
        return True
    sanity.extractsingle, sanity.assert_eq = extractsingle, assert_eq
    core = types.ModuleType("reframe.core")
    utility = types.ModuleType("reframe.utility")
    utility.sanity = sanity
    for name, mod in {"reframe": rfm, "reframe.core": core, "reframe.core.builtins": builtins,
                      "reframe.utility": utility, "reframe.utility.sanity": sanity}.items():
        sys.modules[name] = mod


def lookup(reference, partition, var):
    """ReFrame's rule: the variable under 'system:partition', else 'system', else '*'; None: unchecked."""
    system = partition.split(":")[0]
    for scope in (partition, system, "*"):
        if var in reference.get(scope, {}):
            return reference[scope][var]
    return None


def outcome(cls, references, system, fom, deck="tiny", point="1:local"):
    """The check run on a stdout with one RESULT line: 'fail (...)', 'pass' or 'unchecked'."""
    t = cls.__new__(cls)
    t.deck, t.point, t.references_file, t.minilst = deck, point, references, "minilst"
    t.current_system = types.SimpleNamespace(name=system)
    t.current_partition = types.SimpleNamespace(fullname=f"{system}:gpu")
    t.reference = {}
    hooks = [getattr(cls, n) for n in dir(cls) if hasattr(getattr(cls, n), "_hook")]
    order = [("after", "init"), ("before", "run"), ("before", "performance")]
    work = tempfile.mkdtemp()
    t.stdout = os.path.join(work, "rfm_job.out")
    with open(t.stdout, "w") as f:
        f.write(f"RESULT: VALID FOM={fom} tokens/s/rank steps=8 final_loss=2.5 ranks=1 MFU=0.3 reportable=yes "
                f"metrics=metrics.h5\n")
    for stage in order:
        for h in hooks:
            if h._hook == stage:
                h(t)
    assert all(getattr(cls, n)(t) for n in dir(cls) if getattr(getattr(cls, n), "_sanity", False))
    value = next(getattr(cls, n)(t) for n in dir(cls) if hasattr(getattr(cls, n), "_perf_unit"))
    ref = lookup(t.reference, t.current_partition.fullname, "fom")
    if ref is None:
        return "unchecked", t
    target, lower, upper, _ = ref
    if value < target * (1 + lower) or (upper is not None and value > target * (1 + upper)):
        return f"fail ({value} against {target}, lower {lower})", t
    return "pass", t


def main():
    install_stand_in()
    spec = importlib.util.spec_from_file_location("minilst_check",
                                                  os.path.join(REPO, "benchmarks", "reframe", "minilst_check.py"))
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    cls = check.MiniLSTCheck
    work = tempfile.mkdtemp()
    refs = os.path.join(work, "references.tsv")
    with open(refs, "w") as f:
        f.write("# system deck ranks layout fom tolerance\n"
                "testsys tiny 1 local 1e12 0.5\n"   # no machine reaches it
                "testsys tiny 2 ulysses 1 0.5\n")   # every machine does
    failures = []
    got, t = outcome(cls, refs, "testsys", 25000.0)
    print("impossible reference:", got, "| reference", t.reference)
    if not got.startswith("fail"):
        failures.append(f"a FOM of 25000 against a reference of 1e12 gave {got}")
    got, _ = outcome(cls, refs, "testsys", 25000.0, point="2:ulysses")
    print("reachable reference:", got)
    if got != "pass":
        failures.append(f"a FOM of 25000 against a reference of 1 gave {got}")
    got, _ = outcome(cls, refs, "elsewhere", 25000.0)
    print("unlisted system:", got)
    if got != "unchecked":
        failures.append(f"a system without references gave {got}")
    old = {"testsys:*": {"fom": (1e12, -0.5, None, "tokens/s/rank")}}
    print("the old key 'testsys:*':", "found" if lookup(old, "testsys:gpu", "fom") else "found by no lookup")
    if lookup(old, "testsys:gpu", "fom") is not None:
        failures.append("the stand-in's lookup finds 'system:*', which ReFrame's does not")
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
