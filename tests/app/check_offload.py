"""Checks the metrics files of one deck run with memory.policy full, offload
(alpha 0.37), checkpoint_offload, offload with alpha auto under a 0.05 GB/s
bandwidth cap, and offload at alpha 1 with 3 MLP chunks (see offload.sh).

Bytes each step must move (one micro-step, L layers, S tokens, scalar bytes T):
  checkpoint_offload  (L-1) S d T each way (the inputs of layers 0..L-2)
  offload             the same, plus (L-2) (S Hh T + S H T + r (Hh + 2Gh + 2d + 3I) T)
                      each way, r = round(alpha S) (o, lse, and r tokens of q, k, v, y
                      and of the MLP's input, gate, up and activation, of layers 0..L-3);
                      at alpha = 1 (auto's warm-up step) nothing is recomputed
  offload, MLP chunks the same without the MLP's four: with mini-sequences the MLP
                      keeps nothing and recomputes its chunks (inside the mlp phase)
"""
import sys

import h5py
import numpy as np
import yaml

failures = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


full, off, ckpt, auto, chunked = (h5py.File(p, "r") for p in sys.argv[1:6])
cfg = yaml.safe_load(off.attrs["config"])
m, S = cfg["model"], int(cfg["run"]["seq_len"])
d, L, H, G = int(m["hidden"]), int(m["layers"]), int(m["heads"]), int(m["kv_heads"])
I = int(m["intermediate"])
h, T = d // H, 8
Hh, Gh = H * h, G * h
row = (Hh + 2 * Gh + 2 * d + 3 * I) * T  # one token of the row tensors

for name, f in (("offload", off), ("checkpoint_offload", ckpt), ("auto", auto), ("chunked", chunked)):
    check(np.allclose(f["loss"][:], full["loss"][:], rtol=1e-12, atol=0), f"{name}: losses equal full's to 1e-12")
    for p in ("offload_wait", "prefetch_wait", "copy_engine_busy", "recompute"):
        check(f["timings"][p].shape == full["timings"]["step"].shape, f"{name}: /timings/{p} [steps, ranks]")
    check(np.all(f["timings"]["copy_engine_busy"][:] > 0), f"{name}: the copy engine was busy every step")
    for c in ("activations", "workspace", "host_offload", "device_total"):
        check(int(f["memory"]["model"][c][0]) == int(f["memory"][c][0]),
              f"{name}: /memory/model/{c} == measured {int(f['memory'][c][0])} B")
    check(int(f["memory"]["device_total"][0]) < int(full["memory"]["device_total"][0]),
          f"{name}: device_total below full's")
    for a in ("offload_engine", "offload_bandwidth_measured_gbs", "offload_layer_forward_s", "offload_host_budget_mib"):
        check(a in f.attrs, f"{name}: attribute {a}")
    check(float(f.attrs["offload_bandwidth_measured_gbs"]) > 0 and float(f.attrs["offload_layer_forward_s"]) > 0,
          f"{name}: measured bandwidth and layer time > 0")

x_bytes = (L - 1) * S * d * T
r = round(0.37 * S)
saved_bytes = (L - 2) * (S * Hh * T + S * H * T + r * row)
for name, f, want in (("checkpoint_offload", ckpt, x_bytes), ("offload", off, x_bytes + saved_bytes)):
    for direction in ("to_host", "to_device"):
        got = f["offload"]["bytes_" + direction][:]
        check(np.all(got == want), f"{name}: {direction} {got[:, 0].tolist()} B per step == {want} B")
check(int(off.attrs["offload_host_rows"]) == r and abs(float(off.attrs["offload_alpha"]) - 0.37) < 1e-12,
      f"offload: alpha 0.37 -> {r} of {S} tokens in host memory")
check(np.all(full["offload"]["bytes_to_host"][:] == 0), "full: nothing moved")

a = float(auto.attrs["offload_alpha"])
check(auto.attrs["offload_alpha_mode"] == "auto" and 0 <= a <= 1, f"auto: alpha {a:.4f} in [0, 1]")
check(abs(float(auto.attrs["offload_bandwidth_measured_gbs"]) - 0.05) <= 0.005,
      f"auto: measured bandwidth {float(auto.attrs['offload_bandwidth_measured_gbs']):.4f} GB/s at the 0.05 cap")
moved = auto["offload"]["bytes_to_host"][:, 0]
check(moved[0] == x_bytes + (L - 2) * (S * Hh * T + S * H * T + S * row), "auto: the warm-up step moves alpha = 1")
check(np.all(auto["timings"]["recompute"][0] == 0), "auto: the warm-up step (alpha = 1, full swap) recomputes nothing")
check(np.all(off["timings"]["recompute"][:] > 0), "offload: alpha 0.37 recomputes the other tokens")
r_auto = int(auto.attrs["offload_host_rows"])
# One plan per run (predict/prediction.hpp); alpha auto re-models its rank once at the alpha it chose.
for name, f in (("full", full), ("offload", off), ("checkpoint_offload", ckpt), ("chunked", chunked)):
    check(int(f.attrs["deck_plans"]) == 1 and int(f.attrs["rank_remodels"]) == 0,
          f"{name}: one plan, no rank re-modelled ({int(f.attrs['deck_plans'])}, {int(f.attrs['rank_remodels'])})")
remodels = 0 if a == 1.0 else 1  # another alpha than the warm-up step's: its memory and bytes re-modelled
check(int(auto.attrs["deck_plans"]) == 1 and int(auto.attrs["rank_remodels"]) == remodels,
      f"auto: one plan, {remodels} re-model at the chosen alpha ({int(auto.attrs['rank_remodels'])})")
check(np.all(moved[1:] == x_bytes + (L - 2) * (S * Hh * T + S * H * T + r_auto * row)),
      f"auto: later steps move the chosen alpha ({r_auto} tokens)")

# Offload with mini-sequences: alpha 1, the MLP in 3 chunks, its [S, I] tensors never whole.
check(int(chunked.attrs["mlp_chunks"]) == 3, "chunked: 3 MLP chunks recorded")
row_no_mlp = (Hh + 2 * Gh + d) * T  # q, k, v, y
want = x_bytes + (L - 2) * (S * Hh * T + S * H * T + S * row_no_mlp)
for direction in ("to_host", "to_device"):
    got = chunked["offload"]["bytes_" + direction][:]
    check(np.all(got == want), f"chunked: {direction} {got[:, 0].tolist()} B per step == {want} B (no MLP tensors)")
check(np.all(chunked["timings"]["recompute"][:] == 0), "chunked: alpha 1 recomputes no token rows")
for other, f in (("auto (alpha 1 at its warm-up, one MLP chunk)", auto), ("offload 0.37", off), ("full", full)):
    check(int(chunked["memory"]["activations"][0]) < int(f["memory"]["activations"][0]),
          f"chunked: activations {int(chunked['memory']['activations'][0])} B below {other}'s "
          f"{int(f['memory']['activations'][0])} B")
print(f"offload checks: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
