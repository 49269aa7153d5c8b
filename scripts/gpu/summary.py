#!/usr/bin/env python3
"""The device check's summary (scripts/gpu/check.sh): OUTDIR/summary.json from what
each part left in OUTDIR and OUTDIR/work. Run after every part, so a check that
stops early still has the summary of what finished. The keys are the same in a
GPU run and in the dry run; a value a part did not produce is null.

  summary.py OUTDIR --mode gpu|dry-run --budget-s N [--bundle DIR]

Figures (each beside its target where the check has one):
  attention.fraction_of_gemm   attention forward + backward FLOP rate over the bf16
                               GEMM rate of the same process (target >= 0.35)
  step.ratio                   miniLST's median step time over PyTorch's (target <= 1.25)
  step.*_mfu                   model FLOPs per step / (median step time x peak): the
                               peak is the datasheet's bf16 dense rate where the GPU is
                               known, and the bf16 GEMM rate measured by miniLST's run
  memory.tracked_over_plan     device bytes miniLST tracked at its high-water over the
                               plan's prediction (minilst plan; target within 5%)
  memory.used_over_plan        the driver's peak used memory less the idle level, over
                               the plan (adds the CUDA context, cuBLAS and the allocator)
  team_rows.*                  the layer check's verdict and the step's median time and
                               phases with the row-wise kernels in the GPU's layout
  offload.hidden_fraction      1 - (offload + prefetch waits) / copy-engine busy time
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys
import tempfile

PARTS = ["device", "layer_check", "step", "attention", "cuda_tests", "team_rows", "offload"]  # check.sh's order
# The summary's keys, in order: the same in a GPU run and in the dry run.
SUMMARY_KEYS = ["schema", "schema_version", "mode", "budget_s", "verdict", "headline", "bundle", "device", "parts",
                "cuda_tests", "layer_check", "attention", "step", "memory", "team_rows", "offload", "targets", "errors"]
TARGETS = {"attention_fraction_of_gemm": 0.35, "step_ratio_to_torch": 1.25, "memory_within": 0.05}
# Dense bf16 tensor-core peaks from the datasheets (TFLOP/s, without sparsity).
# The first name contained in the GPU's name wins: the more specific first.
DATASHEET_BF16_TFLOPS = {"H100 80GB HBM3": 989.4, "H100 SXM": 989.4, "H100 PCIe": 756.5, "H100 NVL": 835.0,
                         "H200 NVL": 835.0, "GH200": 989.4, "H200": 989.4, "A100": 312.0}


def read_status(work, name):
    try:
        status, seconds, limit, rc = open(os.path.join(work, name + ".status")).read().split()
        return {"status": status, "seconds": int(seconds), "limit_s": int(limit), "rc": int(rc)}
    except (OSError, ValueError):
        return {"status": "not_run", "seconds": None, "limit_s": None, "rc": None}


def key_values(path):
    out = {}
    try:
        for line in open(path):
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                out[k.strip()] = v.strip()
    except OSError:
        pass
    return out


def h5(path):
    try:
        import h5py
        return h5py.File(path, "r")
    except Exception:  # absent, half-written or unreadable: the part did not finish
        return None


def measured(series, warmup):
    """The measured steps (after the warm-up) of a per-step series."""
    values = [float(x) for x in series]
    return values[warmup:] if len(values) > warmup else values


def median(values):
    values = list(values)
    return statistics.median(values) if values else None


def datasheet_peak(name):
    for model, tflops in DATASHEET_BF16_TFLOPS.items():
        if model in (name or ""):
            return tflops * 1e3, f"datasheet {model}: {tflops} TFLOP/s bf16 dense"
    return None, None


def device_part(work):
    kv = key_values(os.path.join(work, "device.txt"))
    num = lambda k: float(kv[k]) if kv.get(k, "").replace(".", "", 1).isdigit() else None  # noqa: E731
    return {"name": kv.get("name"), "driver": kv.get("driver"), "cuda_version": kv.get("cuda_version"),
            "memory_mib": num("memory_mib"), "clocks_sm_mhz": num("clocks_sm_mhz"),
            "clocks_max_sm_mhz": num("clocks_max_sm_mhz"), "clocks_mem_mhz": num("clocks_mem_mhz"),
            "power_limit_w": num("power_limit_w"), "host": kv.get("host"), "host_cpu": kv.get("host_cpu"),
            "preflight": {"libraries": kv.get("preflight_libraries"), "python": kv.get("preflight_python")}}


def cuda_tests_part(work):
    """Per program: its status and GoogleTest's counts of tests passed and skipped (a
    skipped test checked nothing here: the layouts of several ranks, say)."""
    programs = {}
    try:
        for line in open(os.path.join(work, "cuda_tests.txt")):
            name, rc, *counts = line.split()
            count = lambda i: int(counts[i]) if len(counts) > i and counts[i].isdigit() else None  # noqa: E731
            programs[name] = {"status": "passed" if rc == "0" else
                              ("timed_out" if rc in ("124", "137") else f"failed (rc {rc})"),
                              "tests_passed": count(0), "tests_skipped": count(1)}
    except (OSError, ValueError):
        pass
    passed = sum(1 for p in programs.values() if p["status"] == "passed")
    skipped = sum(p["tests_skipped"] or 0 for p in programs.values())
    return {"programs": programs, "passed": passed, "failed": len(programs) - passed, "tests_skipped": skipped}


def layer_check_part(out):
    f = h5(os.path.join(out, "layer_check.h5"))
    res = {"verdict": None, "losses": None, "reference": None, "max_rel_diff": None, "rtol": None,
           "attention_kernel": None, "gemm_bf16": None}
    if f is None:
        return res
    import yaml
    deck = yaml.safe_load(f.attrs["config"])
    losses = [float(x) for x in f["loss"][:]]
    ref = [float(x) for x in str(deck.get("reference", {}).get("losses", "")).split()]
    res.update(losses=losses, reference=ref or None, verdict=str(f.attrs.get("valid", "")),
               rtol=float(deck.get("reference", {}).get("rtol", 0)) or None,
               attention_kernel=str(f.attrs.get("attention_kernel", "")), gemm_bf16=str(f.attrs.get("gemm_bf16", "")))
    if ref:
        n = min(len(ref), len(losses))
        res["max_rel_diff"] = max(abs(losses[i] - ref[i]) / abs(ref[i]) for i in range(n))
    return res


def attention_part(work):
    rows = []
    try:
        for line in open(os.path.join(work, "attention.jsonl")):
            if line.startswith("{"):
                rows.append(json.loads(line))
    except OSError:
        pass
    keep = ("seq_len", "heads", "kv_heads", "head_dim", "attention_kernel", "forward_s", "backward_s",
            "forward_gflops", "backward_gflops", "gflops", "gemm_gflops", "fraction_of_gemm")
    rows = [{k: r.get(k) for k in keep} for r in rows]
    worst = min((r["fraction_of_gemm"] for r in rows), default=None)
    return {"runs": rows, "min_fraction_of_gemm": worst}


def step_part(out, work, device_name):
    res = {"seq_len": None, "minilst_step_s": None, "torch_step_s": None, "ratio": None, "minilst_mfu": None,
           "torch_mfu": None, "peak_gflops": None, "peak_source": None, "measured_gemm_gflops": None,
           "flops_per_step": None, "phases": {}, "minilst_loss": None, "torch_loss": None,
           "attention_kernel": None, "gemm_bf16": None, "torch_attention": None, "torch_lm_head_chunks": None}
    mem = {"plan_device_bytes": None, "tracked_device_bytes": None, "tracked_over_plan": None,
           "used_device_bytes": None, "used_over_plan": None, "torch_max_allocated_bytes": None}
    f = h5(os.path.join(out, "step_minilst.h5"))
    try:
        plan = json.load(open(os.path.join(work, "plan.json")))
        mem["plan_device_bytes"] = plan_device_bytes(plan)
    except (OSError, ValueError, KeyError):
        plan = None
    if f is None:
        return res, mem
    warm = int(f.attrs.get("warmup_steps", 1))
    t_ml = median(measured(f["timings/step"][:, 0], warm))
    if t_ml is None:
        return res, mem
    flops = float(f.attrs["flops_per_step"])
    measured_peak = float(f.attrs.get("peak_gflops_per_rank", 0)) or None
    peak, source = datasheet_peak(device_name)
    if peak is None:
        peak, source = measured_peak, "measured: the run's bf16 GEMM rate"
    res.update(seq_len=int(f.attrs["seq_len"]), minilst_step_s=t_ml, flops_per_step=flops,
               measured_gemm_gflops=measured_peak, peak_gflops=peak, peak_source=source,
               minilst_mfu=flops / t_ml / (peak * 1e9) if peak else None,
               minilst_loss=[float(x) for x in f["loss"][:]],
               attention_kernel=str(f.attrs.get("attention_kernel", "")), gemm_bf16=str(f.attrs.get("gemm_bf16", "")))
    phases = ("attention", "mlp", "lm_head", "optimizer", "forward", "backward")
    for p in phases:
        if f"timings/{p}" in f:
            res["phases"][p] = {"minilst_s": median(measured(f[f"timings/{p}"][:, 0], warm)), "torch_s": None}
    mem["tracked_device_bytes"] = int(f["memory/device_total"][0])
    if mem["plan_device_bytes"]:
        mem["tracked_over_plan"] = mem["tracked_device_bytes"] / mem["plan_device_bytes"]
        used = driver_used_bytes(work)
        if used is not None:
            mem["used_device_bytes"] = used
            mem["used_over_plan"] = used / mem["plan_device_bytes"]
    try:
        t = json.load(open(os.path.join(out, "step_torch.json")))
    except (OSError, ValueError):
        return res, mem
    steps = t["steps"][warm:] if len(t["steps"]) > warm else t["steps"]
    t_pt = median(s["step"] for s in steps)
    if not t_pt:
        return res, mem
    res.update(torch_step_s=t_pt, ratio=t_ml / t_pt, torch_mfu=flops / t_pt / (peak * 1e9) if peak else None,
               torch_loss=[s["loss"] for s in t["steps"]], torch_attention=t.get("attention"),
               torch_lm_head_chunks=t.get("lm_head_chunks"))
    for p in res["phases"]:
        if all(p in s for s in steps):
            res["phases"][p]["torch_s"] = median(s[p] for s in steps)
    mem["torch_max_allocated_bytes"] = t.get("max_memory_allocated_bytes")
    return res, mem


def plan_device_bytes(plan):
    """The plan's device high-water (minilst plan --format json: memory_bytes is the
    largest rank's)."""
    return int(plan["memory_bytes"]["device_total"])


def driver_used_bytes(work):
    try:
        values = [float(x) for x in open(os.path.join(work, "memory_used.txt")).read().split() if x.strip()]
    except (OSError, ValueError):
        return None
    if len(values) < 2:
        return None
    return int((max(values) - values[0]) * 2**20)


def team_rows_part(out):
    """The layer check and the step run with MINILST_ROW_LAYOUT=team (check.sh's team_rows)."""
    res = {"layer_check_verdict": None, "step_s": None, "phases": {}}
    f = h5(os.path.join(out, "team_rows_layer.h5"))
    if f is not None:
        res["layer_check_verdict"] = str(f.attrs.get("valid", ""))
    f = h5(os.path.join(out, "team_rows_step.h5"))
    if f is not None:
        warm = int(f.attrs.get("warmup_steps", 1))
        res["step_s"] = median(measured(f["timings/step"][:, 0], warm))
        res["phases"] = {p: median(measured(f[f"timings/{p}"][:, 0], warm))
                         for p in ("attention", "mlp", "lm_head", "optimizer") if f"timings/{p}" in f}
    return res


def offload_part(out):
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "offload_*.h5"))):
        f = h5(path)
        if f is None:
            continue
        warm = int(f.attrs.get("warmup_steps", 1))
        med = lambda n: (median(measured(f[f"timings/{n}"][:, 0], warm)) or 0.0) if f"timings/{n}" in f else 0.0  # noqa
        busy, waits = med("copy_engine_busy"), med("offload_wait") + med("prefetch_wait")
        rows.append({"policy": str(f.attrs.get("memory_policy", "")), "alpha": float(f.attrs.get("offload_alpha", math.nan))
                     if "offload_alpha" in f.attrs else None, "step_s": med("step"), "copy_busy_s": busy,
                     "wait_s": waits, "hidden_fraction": (1 - waits / busy) if busy > 0 else None,
                     "bytes_to_host": int(f["offload/bytes_to_host"][-1].sum()) if "offload/bytes_to_host" in f else None,
                     "verdict": str(f.attrs.get("valid", ""))})
    return {"runs": rows}


def target(value, goal, better):
    if value is None:
        return {"value": None, "target": goal, "met": None}
    return {"value": value, "target": goal, "met": bool(value >= goal if better == "higher" else value <= goal)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--mode", choices=("gpu", "dry-run"), required=True)
    ap.add_argument("--budget-s", type=int, required=True)
    ap.add_argument("--bundle", default="")
    args = ap.parse_args()
    out, work = args.out, os.path.join(args.out, "work")
    parts = {name: read_status(work, name) for name in PARTS}
    errors = {}
    absent = os.path.join(work, ".absent")  # a folder with no files: a part's figures all null

    def guarded(name, fn, *paths, **kw):
        """A part's figures; where its files cannot be read, the error (in `errors`) and
        the part's null figures, with the same keys: one bad file must not keep the
        summary of the others from being written."""
        try:
            return fn(*paths, **kw)
        except Exception as e:  # noqa: BLE001
            errors[name] = f"{type(e).__name__}: {e}"
            return fn(*(absent for _ in paths), **kw)

    device = guarded("device", device_part, work)
    step, memory = guarded("step", step_part, out, work, device_name=device["name"])
    attention = guarded("attention", attention_part, work)
    mem_dev = memory["tracked_over_plan"]
    targets = {
        "attention_fraction_of_gemm": target(attention["min_fraction_of_gemm"], TARGETS["attention_fraction_of_gemm"], "higher"),
        "step_ratio_to_torch": target(step["ratio"], TARGETS["step_ratio_to_torch"], "lower"),
        "memory_tracked_within_plan": target(abs(mem_dev - 1) if mem_dev is not None else None,
                                             TARGETS["memory_within"], "lower"),
    }
    manifest = os.path.join(args.bundle, "MANIFEST") if args.bundle else ""
    cuda_tests = guarded("cuda_tests", cuda_tests_part, work)
    layer_check = guarded("layer_check", layer_check_part, out)
    team_rows = guarded("team_rows", team_rows_part, out)
    offload = guarded("offload", offload_part, out)
    # FAILED: a part failed, ran past its own limit or left files that cannot be read;
    # INCOMPLETE: parts were skipped or cut short by the budget (the check ran out of
    # time, no part was wrong).
    failed = [n for n, p in parts.items() if p["status"] in ("failed", "timed_out") or n in errors]
    done = [n for n, p in parts.items() if p["status"] == "passed"]
    cut = [n for n, p in parts.items() if p["status"] in ("skipped", "cut_short", "not_run")]
    verdict = "FAILED" if failed else ("PASSED" if len(done) == len(PARTS) else "INCOMPLETE")
    headline = (f"{len(done)}/{len(PARTS)} parts passed" + (f"; failed: {', '.join(failed)}" if failed else "") +
                (f"; not finished: {', '.join(cut)}" if cut else "") +
                "; " + ", ".join(f"{k} {v['value']:.3g} ({'met' if v['met'] else 'missed'} {v['target']})"
                                 for k, v in targets.items() if v["value"] is not None))
    values = {
        "schema": "minilst-gpu-check", "schema_version": 1, "mode": args.mode, "budget_s": args.budget_s,
        "verdict": verdict, "headline": headline,
        "bundle": open(manifest).read().splitlines()[:6] if manifest and os.path.exists(manifest) else None,
        "device": device, "parts": parts,
        "cuda_tests": cuda_tests, "layer_check": layer_check,
        "attention": attention, "step": step, "memory": memory, "team_rows": team_rows, "offload": offload,
        "targets": targets,
        "errors": errors,
    }
    summary = {k: values[k] for k in SUMMARY_KEYS}
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".summary.")
    with os.fdopen(fd, "w") as f:
        json.dump(summary, f, indent=1, default=lambda x: None)
    os.replace(tmp, os.path.join(out, "summary.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
