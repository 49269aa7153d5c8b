#!/usr/bin/env python3
"""Reads a scripts/bench/max_seq.sh directory and prints, writes max_seq.h5 and
draws max_seq.png: the longest sequence per technique stack within a per-rank
budget, predicted and (at CPU scale) confirmed by a run, and the Llama-3-8B
predictions beside the seed papers' numbers.

    /usr/bin/python3 analysis/max_seq.py DIR --budget-mib MIB
"""
import argparse
import json
import os

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

MiB = 2.0 ** 20
# What the seed papers report for Llama-3-8B on 80 GB GPUs (bf16; their setups differ in detail).
SEEDS = {
    "vanilla": "5K (MsT)",
    "hf_checkpoint (the papers' recomputation)": "14K (MsT)",
    "checkpoint": "-",
    "+ chunked LM head and MLP": "60K (MsT); 160K-1.1M (ALST, with tiling)",
    "+ offload": "500K (ALST, 1 GPU)",
    "+ 8 ranks (ulysses, ZeRO-3)": "3.7M (ALST, 8 GPUs); 1M (MEMO, 8 GPUs)",
    "+ 64 ranks (8 ulysses x 8 ring, ZeRO-3)": "8M (MEMO, 64 GPUs)",
}


def rows(path):
    return [line.rstrip("\n").split("|") for line in open(path) if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--budget-mib", type=float, required=True)
    a = ap.parse_args()
    d = a.dir
    cpu = []
    for i, name, ranks, status in rows(os.path.join(d, "cpu.txt")):
        plan = json.load(open(os.path.join(d, f"plan_{i}.json")))
        nxt = json.load(open(os.path.join(d, f"next_{i}.json")))
        measured = None
        run = os.path.join(d, f"run_{i}.h5")
        if os.path.exists(run):
            f = h5py.File(run, "r")
            measured = int(f["memory"]["device_total"][:].max())
            assert f.attrs["valid"] == "PASSED", run
        # what a run holds (the planned arena and what lives outside it), against the budget less the reserve
        cpu.append(dict(name=name, ranks=int(ranks), S=plan["seq_len"], predicted=plan["device_planned_bytes"],
                        next_predicted=nxt["device_planned_bytes"], next_fits=nxt["fits"], measured=measured,
                        usable=plan["device_budget_mib"] * MiB))
    base = cpu[0]["S"]
    print(f"CPU scale (inputs/max_seq_cpu.yaml), {a.budget_mib:.0f} MiB of device memory per rank "
          f"({cpu[0]['usable'] / MiB:.0f} MiB after the plan's runtime reserve):")
    print(f"  {'stack':32s} {'ranks':>5s} {'longest S':>10s} {'x vanilla':>9s} {'predicted MiB':>13s} "
          f"{'measured MiB':>12s} {'S+1 predicted':>13s}")
    for r in cpu:
        meas = f"{r['measured'] / MiB:12.2f}" if r["measured"] is not None else f"{'-':>12s}"
        print(f"  {r['name']:32s} {r['ranks']:5d} {r['S']:10d} {r['S'] / base:9.1f} {r['predicted'] / MiB:13.2f} {meas} "
              f"{r['next_predicted'] / MiB:13.2f}")
        assert r["predicted"] <= r["usable"] and not r["next_fits"], r
        if r["measured"] is not None:
            assert r["measured"] <= r["usable"], r
    llama = []
    for j, name, ranks in rows(os.path.join(d, "llama.txt")):
        p = json.load(open(os.path.join(d, f"llama_{j}.json")))
        m = p["memory_bytes"]
        llama.append(dict(name=name, ranks=int(ranks), S=p["seq_len"], host=m["host_offload"] + m["host_optimizer"],
                          states=m["weights"] + m["gradients"] + m["optimizer"], zero=p["zero_stage"],
                          mlp=p["mlp_chunks"], head=p["lm_head_chunks"], precision=p["precision"]))
    precision = llama[0]["precision"] if llama else "?"
    print(f"\nLlama-3-8B shape, {precision}, whole devices: an H100 80GB (81,559 MiB less a 4,096 MiB reserve) and "
          "240 GiB of host memory per rank, "
          "model states counted (optimizer offloaded, ZeRO), predicted:")
    print(f"  {'stack':44s} {'ranks':>5s} {'ZeRO':>4s} {'longest S':>11s} {'states GiB':>10s} {'host GiB':>8s}   "
          "seeds (bf16)")
    for r in llama:
        print(f"  {r['name']:44s} {r['ranks']:5d} {r['zero']:4d} {r['S']:11d} {r['states'] / 2**30:10.1f} "
              f"{r['host'] / 2**30:8.1f}   {SEEDS.get(r['name'], '')}")
    with h5py.File(os.path.join(d, "max_seq.h5"), "w") as h:
        h.attrs["budget_mib"] = a.budget_mib
        for group, table in (("cpu", cpu), ("llama3_8b", llama)):
            g = h.create_group(group)
            g.create_dataset("stack", data=np.array([r["name"] for r in table], dtype="S"))
            g.create_dataset("ranks", data=np.array([r["ranks"] for r in table]))
            g.create_dataset("longest_seq_len", data=np.array([r["S"] for r in table])).attrs["units"] = "tokens"
        h["cpu"].create_dataset("predicted_device_bytes", data=np.array([r["predicted"] for r in cpu])).attrs["units"] = "B"
        h["cpu"].create_dataset("measured_device_bytes",
                                data=np.array([r["measured"] if r["measured"] is not None else -1 for r in cpu]))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5), constrained_layout=True)
    for ax, table, title in ((ax1, cpu, f"CPU scale, {a.budget_mib:.0f} MiB per rank"),
                             (ax2, llama, "Llama-3-8B, 80 GiB devices, model states counted (predicted)")):
        y = np.arange(len(table))
        ax.barh(y, [r["S"] for r in table], color=["tab:gray"] + ["tab:blue"] * (len(table) - 1))
        for k, r in enumerate(table):
            ax.text(r["S"], k, f" {r['S']:,} ({r['S'] / table[0]['S']:.1f}x)", va="center", fontsize=8)
        ax.set_yticks(y, [f"{r['name']} [{r['ranks']}]" for r in table])
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("longest sequence (tokens)")
        ax.set_title(title)
    fig.savefig(os.path.join(d, "max_seq.png"), dpi=110)
    print(f"\ntable: {os.path.join(d, 'max_seq.h5')}\nplot:  {os.path.join(d, 'max_seq.png')}")


if __name__ == "__main__":
    main()
