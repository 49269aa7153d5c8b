#!/usr/bin/env python3
"""Checks spack/packages/minilst/package.py without Spack.

  check_spack_recipe.py [--source DIR] [--prefix INSTALL_TREE]

Parses the recipe, imports it against a stub `spack.package` whose directives record
their calls, and checks: the variants and their values, the dependencies and
conflicts, that every -D option cmake_args() passes (for several specs) is an option
or cache variable miniLST's CMake really has, and, with --prefix (a tree made by
`cmake --install`), runs the recipe's own install check against that tree: the
layout it expects and a tiny run of the installed program. Exit 0 when all hold.
"""
import argparse
import ast
import contextlib
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path

sys.dont_write_bytecode = True  # importing the recipe leaves no __pycache__ in the source tree

# ---------------------------------------------------------------------------------
# A stub of Spack's package API: what the recipe imports, recording what it declares.

CALLS = []        # (directive, args, kwargs) in declaration order
WHEN_STACK = []   # conditions of enclosing `with when(...)` blocks


def _directive(name):
    def record(*args, **kwargs):
        if WHEN_STACK:
            kwargs = dict(kwargs)
            kwargs["when"] = " ".join(WHEN_STACK + [kwargs.get("when", "")]).strip()
        CALLS.append((name, args, kwargs))
    record.__name__ = name
    return record


@contextlib.contextmanager
def when(condition):
    WHEN_STACK.append(condition)
    try:
        yield
    finally:
        WHEN_STACK.pop()


def _decorator(name):
    def factory(*dargs, **dkwargs):
        def wrap(fn):
            fn.__dict__.setdefault("_stub_decorators", []).append((name, dargs, dkwargs))
            return fn
        return wrap
    return factory


class InstallError(Exception):
    pass


class Prefix(str):
    """A path whose attributes are sub-paths, as Spack's Prefix."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Prefix(os.path.join(self, name))

    def join(self, name):
        return Prefix(os.path.join(self, name))


def join_path(*parts):
    return os.path.join(*[str(p) for p in parts])


class Executable:
    def __init__(self, path):
        self.path = path

    def __call__(self, *args, output=None, error=None, extra_env=None, fail_on_error=True, **_):
        env = dict(os.environ, **(extra_env or {}))
        proc = subprocess.run([self.path, *map(str, args)], env=env, capture_output=True, text=True)
        if fail_on_error and proc.returncode != 0:
            raise InstallError(f"{self.path} {' '.join(map(str, args))}: exit {proc.returncode}\n"
                               f"{proc.stdout}{proc.stderr}")
        if output is str:
            return proc.stdout + (proc.stderr if error is str else "")
        return None


def which(*names, required=False, **_):
    for name in names:
        if os.path.isfile(name) and os.access(name, os.X_OK):
            return Executable(name)
    if required:
        raise InstallError(f"no executable {names}")
    return None


def any_combination_of(*values):
    return ("none",) + values


class PackageBase:
    def __init__(self, spec, prefix="/nonexistent"):
        self.spec = spec
        self.prefix = Prefix(prefix)

    def define(self, name, value):
        if isinstance(value, bool):
            return f"-D{name}:BOOL={'ON' if value else 'OFF'}"
        if isinstance(value, (list, tuple)):
            value = ";".join(str(v) for v in value)
        return f"-D{name}:STRING={value}"

    def define_from_variant(self, name, variant=None):
        variant = variant or name.lower()
        if variant not in self.spec.variants:
            return ""
        return self.define(name, self.spec.variants[variant].value)


class CMakePackage(PackageBase):
    pass


class CudaPackage(PackageBase):
    cuda_arch_values = ("70", "80", "90", "90a")  # a few of Spack's


def stub_modules():
    """sys.modules entries for `spack` and `spack.package`."""
    pkg = types.ModuleType("spack.package")
    names = {
        "PackageBase": PackageBase, "CMakePackage": CMakePackage, "CudaPackage": CudaPackage,
        "InstallError": InstallError, "Prefix": Prefix, "join_path": join_path, "which": which,
        "Executable": Executable, "when": when, "any_combination_of": any_combination_of,
        "run_after": _decorator("run_after"), "run_before": _decorator("run_before"),
        "on_package_attributes": _decorator("on_package_attributes"),
    }
    for d in ("version", "variant", "depends_on", "conflicts", "requires", "maintainers", "license",
              "patch", "provides", "resource", "extends", "redistribute", "build_system", "default_args"):
        names[d] = _directive(d)
    for k, v in names.items():
        setattr(pkg, k, v)
    pkg.__all__ = list(names)
    spack = types.ModuleType("spack")
    spack.package = pkg
    return {"spack": spack, "spack.package": pkg}


def load_recipe(path, with_spack_repo=False):
    """Imports the recipe; with_spack_repo: as Spack >= 1.0, where the build systems come
    from spack_repo.builtin.build_systems (stubbed with the same classes)."""
    CALLS.clear()
    mods = stub_modules()
    for name in [m for m in sys.modules if m == "spack_repo" or m.startswith("spack_repo.")]:
        del sys.modules[name]
    if with_spack_repo:
        for name in ("spack_repo", "spack_repo.builtin", "spack_repo.builtin.build_systems"):
            mods[name] = types.ModuleType(name)
        cmake, cuda = (types.ModuleType("spack_repo.builtin.build_systems." + n) for n in ("cmake", "cuda"))
        cmake.CMakePackage, cuda.CudaPackage = CMakePackage, CudaPackage
        mods[cmake.__name__], mods[cuda.__name__] = cmake, cuda
    sys.modules.update(mods)
    spec = importlib.util.spec_from_file_location("spack.pkg.minilst.minilst", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in mods:
        sys.modules.pop(name, None)
    return module.Minilst, list(CALLS)


# ---------------------------------------------------------------------------------
# A fake concrete spec: variants, a small part of Spack's spec syntax, dependencies.

class Variant:
    def __init__(self, value):
        self.value = value


class Dep:
    def __init__(self, name):
        self.prefix = Prefix(f"/spack/opt/{name}")
        self.libs = [f"/spack/opt/{name}/lib/lib{name}.so"]
        self.package = types.SimpleNamespace(kokkos_cxx=f"/spack/opt/{name}/bin/nvcc_wrapper")


class FakeSpec:
    def __init__(self, **variants):
        self.values = variants
        self.variants = {k: Variant(v) for k, v in variants.items()}

    def _term(self, term):
        if term.startswith("+"):
            return bool(self.values.get(term[1:]))
        if term.startswith("~"):
            return not self.values.get(term[1:])
        if "=" in term:
            key, value = term.split("=", 1)
            have = self.values.get(key)
            return value in have if isinstance(have, tuple) else str(have) == value
        raise ValueError(f"the fake spec does not understand '{term}'")

    def satisfies(self, text):
        terms = re.findall(r"[+~][\w-]+|[\w-]+=[\w,.-]+", text)
        if not terms or text.strip().startswith("^"):
            raise ValueError(f"the fake spec does not understand '{text}'")
        return all(self._term(t) for t in terms)

    def __contains__(self, text):
        return self.satisfies(text)

    def __getitem__(self, name):
        return Dep(name)


# ---------------------------------------------------------------------------------
# What miniLST's CMake accepts on the command line.

CMAKE_BUILTINS = {"CMAKE_BUILD_TYPE", "CMAKE_CXX_COMPILER", "CMAKE_C_COMPILER", "CMAKE_INSTALL_PREFIX",
                  "CMAKE_PREFIX_PATH", "CMAKE_INSTALL_RPATH_USE_LINK_PATH"}


# The Spack package behind each package miniLST's CMake requires (None: the system's).
SPACK_NAME = {"Kokkos": "kokkos", "KokkosKernels": "kokkos-kernels", "MPI": "mpi", "HDF5": "hdf5",
              "yaml-cpp": "yaml-cpp", "CLI11": "cli11", "nlohmann_json": "nlohmann-json",
              "GTest": "googletest", "CUDAToolkit": "cuda", "Threads": None}


def cmake_code(path):
    """A CMake file without its comments."""
    return re.sub(r"#[^\n]*", "", path.read_text())


def test_cmake_files(source):
    """The test registration miniLST's own configure reads (not the separate projects
    under tests/, such as tests/install/consumer)."""
    return [source / "tests" / "CMakeLists.txt", *sorted((source / "tests").glob("*/tests.cmake"))]


def cmake_files(source, tests=True):
    files = [source / "CMakeLists.txt", *sorted((source / "cmake").glob("*.cmake"))]
    return files + test_cmake_files(source) if tests else files


def required_packages(source, tests):
    """The packages find_package(... REQUIRED) asks for: the program's, or the tests'."""
    found = set()
    files = cmake_files(source, tests=False) if not tests else test_cmake_files(source)
    for f in files:
        for name, rest in re.findall(r"\bfind_package\(\s*([\w-]+)([^)]*)\)", cmake_code(f)):
            if re.search(r"\bREQUIRED\b", rest):
                found.add(name)
    return found


def cmake_variables(source):
    """Options, cache variables and find_* results defined by the CMake files, and the
    <Package>_ROOT hints of the packages they find."""
    names = set(CMAKE_BUILTINS)
    for f in cmake_files(source):
        text = cmake_code(f)
        names.update(re.findall(r"\boption\(\s*(\w+)", text))
        names.update(re.findall(r"\bset\(\s*(\w+)[^)]*\bCACHE\b", text))
        names.update(re.findall(r"\bfind_(?:path|library|program|file)\(\s*(\w+)", text))
        for pkg in re.findall(r"\bfind_package\(\s*(\w[\w-]*)", text):
            names.update({f"{pkg}_ROOT", f"{pkg}_DIR"})
    return names


# ---------------------------------------------------------------------------------

FAILURES = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILURES.append(what)


def directives(calls, name):
    return [(a, k) for d, a, k in calls if d == name]


def check_releases(cls, calls, source, recipe):
    """A versioned release: url (a tag's release asset under the homepage), and a version whose sha256 is 64 hex
    digits, the project's version among them; scripts/release.sh, run on a tagged scratch clone of this tree,
    writes the checksum of the tarball it makes, and makes the same bytes twice."""
    releases = {a[0]: k for a, k in directives(calls, "version") if "sha256" in k}
    home, url = getattr(cls, "homepage", ""), getattr(cls, "url", "")
    check(re.fullmatch(r"https://\S+", home or "") is not None, "homepage: an https address")
    m = re.fullmatch(re.escape(home) + r"/releases/download/v([0-9.]+)/minilst-([0-9.]+)\.tar\.gz", url or "")
    check(m is not None and m.group(1) == m.group(2), "url: <homepage>/releases/download/vX.Y.Z/minilst-X.Y.Z.tar.gz")
    check(bool(releases) and all(re.fullmatch(r"[0-9a-f]{64}", k["sha256"]) for k in releases.values()),
          "versioned releases, each with a sha256 (64 hex digits)")
    project = re.search(r"^project\(miniLST VERSION ([0-9.]+)", (source / "CMakeLists.txt").read_text(), re.M)
    check(project is not None and project.group(1) in releases,
          f"the project's version {project.group(1) if project else '?'} is a release of the recipe")
    if m:
        check(m.group(1) in releases, f"url's version {m.group(1)} is a release of the recipe")
    script = source / "scripts" / "release.sh"
    if not (source / ".git").exists() or not script.is_file():
        check(script.is_file(), "scripts/release.sh")
        return
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        run = lambda *cmd, cwd=clone: subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        made = run("git", "clone", "-q", "--no-hardlinks", str(source), str(clone), cwd=tmp)
        if made.returncode != 0:
            check(False, f"a scratch clone for release.sh: {made.stderr.strip()}")
            return
        # this tree's recipe and script on a commit tagged as version 9.8.7
        for rel in ("scripts/release.sh", "spack/packages/minilst/package.py"):
            (clone / rel).write_bytes((source / rel).read_bytes())
        cm = clone / "CMakeLists.txt"
        cm.write_text(re.sub(r"^(project\(miniLST VERSION )[0-9.]+", r"\g<1>9.8.7", cm.read_text(), flags=re.M))
        ident = ["-c", "user.name=check", "-c", "user.email=check@localhost"]
        steps = [run("git", "add", "-A"), run("git", *ident, "commit", "-qm", "release check"),
                 run("git", *ident, "tag", "-a", "v9.8.7", "-m", "check")]
        if any(p.returncode for p in steps):
            check(False, "commit and tag the scratch clone: " + " ".join(p.stderr.strip() for p in steps))
            return
        first = run("bash", "scripts/release.sh", "9.8.7")
        tarball = clone / "build-release" / "minilst-9.8.7.tar.gz"
        made = first.returncode == 0 and tarball.is_file()
        check(made, f"release.sh 9.8.7 makes {tarball.name}" + ("" if made else f": {first.stderr.strip()[-300:]}"))
        if first.returncode != 0:
            return
        sha = hashlib.sha256(tarball.read_bytes()).hexdigest()
        new = (clone / "spack/packages/minilst/package.py").read_text()
        check(f'version("9.8.7", sha256="{sha}")' in new, "release.sh writes the tarball's sha256 into the recipe")
        check("/releases/download/v9.8.7/minilst-9.8.7.tar.gz" in new, "release.sh points url at the new tarball")
        names = subprocess.run(["tar", "tzf", str(tarball)], capture_output=True, text=True).stdout.split()
        check(bool(names) and all(n.startswith("minilst-9.8.7/") for n in names) and "minilst-9.8.7/CMakeLists.txt"
              in names, "the tarball holds the tree under minilst-9.8.7/")
        again = run("bash", "scripts/release.sh", "9.8.7")
        check(again.returncode == 0 and hashlib.sha256(tarball.read_bytes()).hexdigest() == sha
              and (clone / "spack/packages/minilst/package.py").read_text() == new,
              "release.sh again: the same bytes, the recipe unchanged")
        wrong = run("bash", "scripts/release.sh", "9.8.8", "v9.8.7")
        check(wrong.returncode != 0 and "not 9.8.8" in wrong.stderr, "release.sh refuses a version CMake does not declare")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = Path(__file__).resolve().parent
    ap.add_argument("--source", type=Path, default=here.parent.parent, help="miniLST's source tree")
    ap.add_argument("--prefix", type=Path, help="an install tree (cmake --install) to run the recipe's check on")
    args = ap.parse_args()
    recipe = args.source / "spack" / "packages" / "minilst" / "package.py"

    ast.parse(recipe.read_text(), str(recipe))
    check(True, f"{recipe.relative_to(args.source)} parses")
    repo_yaml = (args.source / "spack" / "repo.yaml").read_text()
    check(re.search(r"^\s+namespace:\s*['\"]?minilst\b", repo_yaml, re.M) is not None,
          "spack/repo.yaml: namespace minilst")

    cls, calls = load_recipe(recipe)
    check(issubclass(cls, CMakePackage) and issubclass(cls, CudaPackage), "Minilst(CMakePackage, CudaPackage)")
    cls2, _ = load_recipe(recipe, with_spack_repo=True)
    check(cls2.__mro__[1:3] == (CMakePackage, CudaPackage), "imports as Spack >= 1.0 (spack_repo build systems)")

    check(bool(getattr(cls, "git", "")) and directives(calls, "version"), "a git source and a version")
    check(not re.search(r"https?://", getattr(cls, "git", "")), "git is the local clone (the branch main)")
    check_releases(cls, calls, args.source, recipe)

    variants = {a[0]: k for a, k in directives(calls, "variant")}
    backend = variants.get("backend", {})
    check(set(backend.get("values", ())) == {"serial", "openmp", "cuda"} and not backend.get("multi", True),
          "variant backend: one of serial, openmp, cuda")
    for name in ("glpk", "nccl", "tests"):
        check(isinstance(variants.get(name, {}).get("default"), bool), f"variant {name} (boolean)")
    check(variants.get("tests", {}).get("default") is False, "tests off by default")

    deps = {}
    for a, k in directives(calls, "depends_on"):
        deps.setdefault(re.match(r"[\w-]+", a[0]).group(0), []).append((a[0], k.get("when")))
    for name in ("cmake", "kokkos", "kokkos-kernels", "mpi", "hdf5", "yaml-cpp", "cli11", "c", "cxx"):
        check(name in deps, f"depends on {name}")
    for pkgs, cond in ((required_packages(args.source, False), None), (required_packages(args.source, True), "+tests")):
        for pkg in sorted(pkgs):
            name = SPACK_NAME.get(pkg, "?")
            if name == "?":
                check(False, f"find_package({pkg} REQUIRED): which Spack package? (add it to SPACK_NAME and the recipe)")
            elif name:
                ok = any(cond is None or w == cond for _, w in deps.get(name, []))
                check(ok, f"find_package({pkg} REQUIRED) -> depends on {name}" + (f" when {cond}" if cond else ""))
    for name, cond in (("glpk", "+glpk"), ("nccl", "+nccl"), ("googletest", "+tests")):
        check((name, cond) in [(n, w) for n, w in ((d[0], d[1]) for d in deps.get(name, []))],
              f"depends on {name} when {cond}")
    for b in ("serial", "openmp", "cuda"):
        check(any(w == f"backend={b}" and f"+{b}" in s for s, w in deps.get("kokkos", [])),
              f"backend={b} asks for kokkos+{b}")
    check(any(a[0] == "+nccl" and k.get("when") == "~cuda" for a, k in directives(calls, "conflicts")),
          "+nccl conflicts with ~cuda")
    check(any(a[0] == "~cuda" and k.get("when") == "backend=cuda" for a, k in directives(calls, "conflicts")),
          "backend=cuda needs +cuda")

    known = cmake_variables(args.source)
    base = dict(backend="openmp", cuda=False, cuda_arch=("none",), glpk=True, nccl=False, tests=False,
                build_type="Release")
    specs = {
        "backend=openmp +glpk": base,
        "backend=serial ~glpk +tests": dict(base, backend="serial", glpk=False, tests=True),
        "backend=cuda +cuda cuda_arch=90 +nccl +tests": dict(base, backend="cuda", cuda=True, cuda_arch=("90",),
                                                             nccl=True, tests=True),
    }
    for text, values in specs.items():
        opts = [o for o in cls(FakeSpec(**values)).cmake_args() if o]
        parsed = [re.match(r"-D(\w+)(?::(\w+))?=(.*)$", o) for o in opts]
        check(all(parsed), f"{text}: every argument is -DNAME[:TYPE]=VALUE")
        got = {m.group(1): m.group(3) for m in parsed if m}
        unknown = sorted(set(got) - known)
        check(not unknown, f"{text}: every -D option exists in miniLST's CMake" + (f" (not: {unknown})" if unknown else ""))
        check(got.get("MINILST_NATIVE") == "OFF", f"{text}: MINILST_NATIVE=OFF")
        check(got.get("MINILST_ENABLE_GLPK") == ("ON" if values["glpk"] else "OFF"), f"{text}: MINILST_ENABLE_GLPK")
        check(got.get("MINILST_ENABLE_TESTS") == ("ON" if values["tests"] else "OFF"), f"{text}: MINILST_ENABLE_TESTS")
        if values["cuda"]:
            check("CMAKE_CXX_COMPILER" in got, f"{text}: Kokkos' compiler (nvcc_wrapper)")
        if values["nccl"]:
            check({"NCCL_INCLUDE_DIR", "NCCL_LIBRARY"} <= set(got), f"{text}: NCCL's location")

    if args.prefix:
        prefix = args.prefix.resolve()
        for rel in getattr(cls, "sanity_check_is_file", []):
            check((prefix / rel).is_file(), f"install tree has {rel}")
        for rel in getattr(cls, "sanity_check_is_dir", []):
            check((prefix / rel).is_dir(), f"install tree has {rel}/")
        check(any((prefix / lib / "cmake" / "miniLST" / "miniLSTConfig.cmake").is_file() for lib in ("lib", "lib64")),
              "install tree has lib/cmake/miniLST/miniLSTConfig.cmake")
        pkg = cls(FakeSpec(**base), prefix=str(prefix))
        for method in ("check_tiny_run", "test_tiny_run"):
            try:
                getattr(pkg, method)()
                check(True, f"the recipe's {method}() passes on {prefix}")
            except Exception as e:  # noqa: BLE001 - any failure of the recipe's check
                check(False, f"the recipe's {method}() passes on {prefix}: {e}")
        decorated = getattr(cls.check_tiny_run, "_stub_decorators", [])
        check(("run_after", ("install",), {}) in decorated, "check_tiny_run runs after install (with --test)")

    print(f"check_spack_recipe: {len(FAILURES)} failure(s)" if FAILURES else "check_spack_recipe: all checks pass")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
