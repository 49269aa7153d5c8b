#!/usr/bin/env python3
"""Check a GPU bundle (scripts/gpu/pack.sh) before it travels to a bare CUDA node.

Every ELF file under bin/, tests/ and lib/ must find each library it needs
(DT_NEEDED) either inside the bundle's lib/ or among what a CUDA node provides:
the C/C++ runtime, the driver (libcuda, libnvidia-ml) and the toolkit's cudart and
cuBLAS. Programs must look for libraries only through RUNPATH $ORIGIN/../lib,
libraries through $ORIGIN (no path of the machine that built them). The whole
folder must fit in --max-mib (48 MiB: a device run carries at most 64 MiB with
the checkout). Prints one line per problem naming the file and the library, the
glibc version the bundle needs, and exits 1 on any problem.

  scripts/gpu/check_bundle.py BUNDLE [--max-mib 48]
"""
import argparse
import os
import re
import subprocess
import sys

# What a CUDA node provides (scripts/gpu/pack.sh copies everything else).
PROVIDED = re.compile(
    r"^(linux-vdso|ld-linux[-\w.]*|libc|libm|libdl|librt|libpthread|libresolv|libstdc\+\+|libgcc_s"
    r"|libcuda|libcudart|libcublas|libcublasLt|libnvidia-ml)\.so(\.[0-9]+)*$")
RUNPATH = {"bin": "$ORIGIN/../lib", "tests": "$ORIGIN/../lib", "lib": "$ORIGIN"}


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def dynamic_section(path):
    """(needed libraries, runpath or rpath or None) of an ELF file, from readelf -d."""
    out = subprocess.run(["readelf", "-d", "-W", path], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    paths = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[([^\]]*)\]", out)
    return needed, (paths[0] if paths else None)


def glibc_versions(path):
    out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True).stdout
    return {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_([0-9]+(?:\.[0-9]+)+)", out)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle")
    ap.add_argument("--max-mib", type=float, default=48.0)
    args = ap.parse_args()
    root = os.path.abspath(args.bundle)
    if not os.path.isdir(os.path.join(root, "bin")):
        print(f"check_bundle: {root} has no bin/: not a bundle", file=sys.stderr)
        return 2
    shipped = set(os.listdir(os.path.join(root, "lib"))) if os.path.isdir(os.path.join(root, "lib")) else set()
    problems, files, glibc = [], 0, set()
    for folder in ("bin", "tests", "lib"):
        top = os.path.join(root, folder)
        if not os.path.isdir(top):
            continue
        for name in sorted(os.listdir(top)):
            path = os.path.join(top, name)
            if not os.path.isfile(path) or not is_elf(path):
                continue
            files += 1
            needed, runpath = dynamic_section(path)
            rel = f"{folder}/{name}"
            for lib in needed:
                if not PROVIDED.match(lib) and lib not in shipped:
                    problems.append(f"{rel} needs {lib}: neither in lib/ nor provided by a CUDA node")
            if needed and runpath != RUNPATH[folder]:
                problems.append(f"{rel}: RUNPATH is {runpath!r}, expected {RUNPATH[folder]!r}")
            glibc |= glibc_versions(path)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
    if size > args.max_mib * 2**20:
        problems.append(f"the bundle holds {size / 2**20:.1f} MiB, more than {args.max_mib:g} MiB")
    if files == 0:
        problems.append("no program in bin/ or tests/")
    for p in problems:
        print(f"check_bundle: {p}")
    newest = ".".join(map(str, max(glibc))) if glibc else "none"
    print(f"check_bundle: {files} ELF files, {size / 2**20:.1f} MiB, {len(shipped)} libraries shipped, "
          f"needs glibc >= {newest}: {'FAILED' if problems else 'PASSED'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
