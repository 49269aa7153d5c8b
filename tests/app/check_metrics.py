"""Checks two metrics files of the same deck run with memory.policy full and checkpoint.

Asserts the layout of docs/metrics.md (schema, provenance attributes, units on every
dataset, [steps, ranks] timings with Caliper-style per-rank statistics, memory per
category and device_total), equal losses for both policies, and that checkpoint's
activation high-water is lower than full's and equal to the analytic model:
  x of every layer (L+1) S d, plus saved q,k,v,o,lse,y of all layers (full) or one (checkpoint).
"""
import sys

import h5py
import numpy as np
import yaml

PHASES = ["step", "forward", "backward", "attention", "mlp", "lm_head", "recompute", "comm", "grad_reduce",
          "param_gather", "optimizer"]
CATEGORIES = ["weights", "gradients", "optimizer", "activations", "workspace", "comm", "host_offload", "host_optimizer"]
HOST = ("host_offload", "host_optimizer")
ADIAK = ["user", "launchdate", "executable", "cmdline", "hostname", "clustername", "jobsize", "numhosts",
         "hostlist", "mpi_library_version"]
BUILD = ["git_commit", "git_dirty", "compiler", "cmake_build_type", "kokkos_version", "kokkos_devices", "blas"]

failures = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def read(path):
    f = h5py.File(path, "r")
    a = f.attrs
    check(a["schema"] == "minilst-metrics" and int(a["schema_version"]) >= 1, f"{path}: schema attributes")
    check(a["valid"] == "PASSED" and float(a["fom"]) > 0 and a["fom_unit"] == "tokens/s per rank",
          f"{path}: valid, fom, fom_unit")
    missing = [k for k in ADIAK + BUILD if k not in a]
    check(not missing, f"{path}: provenance keys present (missing: {missing})")
    check(a["kernel_variant"] == "optimized" and a["cpu_isa"] != "" and int(a["memory_bytes"]) > 0,
          f"{path}: kernel_variant, the machine's CPU ISA and memory recorded")
    check(a["attention_kernel"] in ("portable", "tensor_core_bf16", "tensor_core_tf32"),
          f"{path}: the attention kernel that ran recorded ({a.get('attention_kernel')})")
    cfg = yaml.safe_load(a["config"])
    check(cfg["model"]["layers"] == 4 and "policy" in cfg["memory"], f"{path}: resolved deck stored in 'config'")

    steps, ranks = len(f["loss"]), int(a["jobsize"])
    check(np.all(np.isfinite(f["loss"][:])), f"{path}: /loss finite, {steps} steps")
    for name, ds in f.items():
        if isinstance(ds, h5py.Dataset):
            check("units" in ds.attrs, f"{path}: /{name} has units")
    for p in PHASES:
        ds = f["timings"][p]
        ok = ds.shape == (steps, ranks) and ds.attrs["units"] == "s"
        ok = ok and all(k in ds.attrs for k in ("Min time/rank", "Max time/rank", "Avg time/rank"))
        check(ok, f"{path}: /timings/{p} [steps, ranks] in s with per-rank statistics")
    t = f["timings"]
    w = int(a["warmup_steps"])
    check(np.allclose(t["step"].attrs["Avg time/rank"], t["step"][w:].mean()), f"{path}: Avg time/rank over measured steps")
    check(np.all(t["step"][:] >= t["forward"][:]) and np.all(t["forward"][:] > 0), f"{path}: step >= forward > 0")
    slowest = t["step"][w:].max(axis=1)
    check(np.isclose(float(a["fom"]), float(a["tokens_per_step"]) / ranks / slowest.mean()),
          f"{path}: fom = tokens per step / ranks / mean measured step time")
    # MFU: over its fixed peak per rank (results/mfu_peak.hpp; the run's own GEMM rate beside it), the step's
    # model FLOP/s over ranks x peak, per step and in total
    check(float(a["peak_gflops_per_rank"]) > 0 and str(a["mfu_peak_kind"]) in ("datasheet", "machine", "host", "run")
          and str(a["mfu_peak_source"]), f"{path}: the run's GEMM rate and MFU's peak with its kind and source")
    peak = float(a["mfu_peak_gflops_per_rank"]) * 1e9
    mfu = float(f.attrs["mfu"])
    expected = float(a["flops_per_step"]) * len(slowest) / slowest.sum() / (ranks * peak) if peak > 0 else 0
    check(peak > 0 and 0 < mfu < 2 and np.isclose(mfu, expected, rtol=1e-9),
          f"{path}: mfu {mfu:.4f} = model FLOP/s / (ranks x MFU's peak {peak / 1e9:.1f} GFLOP/s)")
    check(f["throughput/mfu"].shape == (steps,) and np.allclose(f["throughput/mfu"][w:],
          float(a["flops_per_step"]) / slowest / (ranks * peak)), f"{path}: /throughput/mfu per step")
    check(all(0 < float(a.get(f"mfu_{p}", -1)) < 2 for p in ("attention", "mlp", "lm_head")), f"{path}: per-phase MFU")
    mem = {c: int(f["memory"][c][0]) for c in CATEGORIES + ["device_total"]}
    for c in CATEGORIES + ["device_total"]:
        check(f["memory"][c].attrs["units"] == "B", f"{path}: /memory/{c} in B")
    device = [c for c in CATEGORIES if c not in HOST]
    check(max(mem[c] for c in device) <= mem["device_total"] <= sum(mem[c] for c in device),
          f"{path}: max(category) <= device_total <= sum(categories)")
    for c in ["weights", "gradients", "optimizer", "activations", "workspace", "device_total"]:
        check(int(f["memory"]["model"][c][0]) == mem[c],
              f"{path}: /memory/model/{c} (analytic) == measured {mem[c]} B")
    return f, cfg, mem


full, cfg, mem_full = read(sys.argv[1])
ckpt, _, mem_ckpt = read(sys.argv[2])
check(np.allclose(full["loss"][:], ckpt["loss"][:], rtol=1e-12, atol=0), "full and checkpoint losses agree to 1e-12")

m, S = cfg["model"], int(cfg["run"]["seq_len"])
d, L, H, G = int(m["hidden"]), int(m["layers"]), int(m["heads"]), int(m["kv_heads"])
h = d // H
per_layer = S * (2 * H * h + 2 * G * h + H + d)   # q, o, k, v, lse, y
x_all = (L + 1) * S * d
check(mem_full["activations"] == 8 * (x_all + L * per_layer),
      f"full activations {mem_full['activations']} B == analytic {8 * (x_all + L * per_layer)} B")
check(mem_ckpt["activations"] == 8 * (x_all + per_layer),
      f"checkpoint activations {mem_ckpt['activations']} B == analytic {8 * (x_all + per_layer)} B")
check(mem_ckpt["activations"] < mem_full["activations"],
      f"checkpoint lowers the activations high-water: {mem_ckpt['activations']} < {mem_full['activations']} B")
check(mem_ckpt["weights"] == mem_full["weights"], "same weights memory for both policies")
print(f"metrics checks: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
