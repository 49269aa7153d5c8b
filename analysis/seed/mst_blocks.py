"""Shared by MsT Tables 12-15 (analysis/seed/mst_table1[2-5].py): a block (the LM head + loss, or
the MLP) alone against the mini-sequence count M, its time or its memory, from minilst_bench_mst
(cpu_bench.h5) and, for the memory tables, Llama-3-8B predictions (gpu_s<S>_m<M>.json).

The block's peak memory is the benchmark's measured workspace high-water (every transient buffer
of the block, which the memory model predicts to the byte) plus what stays resident around the
block: its input, output and gradient tensors of [S, d] (MLP: input, output, output gradient;
LM head: input and input gradient, with the int64 labels) and its weights with their gradients.
"""
import math

import h5py
import numpy as np

import seed_common as sc

# The paper's sequence lengths in Tables 12-15 (Llama-3-8B), as its tables list them.
PAPER_S = [1024, 2048, 4096, 8192, 20000, 40000, 80000]


def _bench(st):
    with h5py.File(f"{st.dir}/cpu_bench.h5", "r") as f:
        assert f.attrs["schema"] == "minilst-bench-mst", "cpu_bench.h5 is not a minilst_bench_mst file"
        b = {k: f.attrs[k] for k in ("hidden", "intermediate", "vocab", "sgemm_gflops")}
        b["S"], b["M"] = f["seq_lens"][:], f["chunks"][:]
        for blk in ("mlp", "lm_head"):
            b[blk] = {k: f[blk][k][:] for k in ("seconds", "workspace_bytes", "model_workspace_bytes", "gflops")}
    return b


def resident_bytes(block, S, d, I, V, act_bytes, weight_bytes, grad_bytes):
    """What stays allocated around the block while it runs (see the module's docstring)."""
    if block == "mlp":
        return 3 * S * d * act_bytes + 3 * d * I * (weight_bytes + grad_bytes)
    return 2 * S * d * act_bytes + 8 * S + (d * V + d) * (weight_bytes + grad_bytes)


def table(script, number, block, quantity, paper, doc):
    """Writes Table `number` (block 'lm_head' | 'mlp', quantity 'time' | 'memory'); paper: {M: [cells per
    PAPER_S]} with None for the cells not available."""
    st = sc.parse_args(doc)
    b = _bench(st)
    S, M, r = b["S"], b["M"], b[block]
    d, I, V = int(b["hidden"]), int(b["intermediate"]), int(b["vocab"])
    name = "LM head + loss" if block == "lm_head" else "MLP block"
    data = {"cpu/seq_lens": S, "cpu/chunks": M, "cpu/seconds": r["seconds"], "cpu/gflops": r["gflops"],
            "cpu/workspace_bytes": r["workspace_bytes"], "cpu/model_workspace_bytes": r["model_workspace_bytes"],
            "cpu/measured_equals_model": np.array_equal(r["workspace_bytes"], r["model_workspace_bytes"]),
            "paper/seq_lens": PAPER_S, "paper/chunks": list(paper), "paper/values":
                [[math.nan if v is None else v for v in paper[m]] for m in paper]}
    ws_ok = bool(data["cpu/measured_equals_model"])
    head = [f"M = {m}" if m != 1 else "standard (M = 1)" for m in M]
    sections, notes = [], []
    if quantity == "time":
        rows = [[f"{s:,}"] + [f"{t:.4f} ({t / ts[0]:.2f})" for t in ts] for s, ts in zip(S, r["seconds"])]
        sections.append((f"CPU scale: the {name} alone (minilst_bench_mst, d = {d}, I = {I}, V = {V}, float), "
                         "forward + backward, median seconds (in brackets: over standard)",
                         sc.md_table(["S"] + head, rows)))
        notes.append(f"The block runs at up to {np.nanmax(r['gflops']):.0f} GFLOP/s; this machine's SGEMM on the "
                     f"MLP's GEMM shape: {b['sgemm_gflops']:.0f} GFLOP/s. A chunk of S / M tokens is a GEMM of "
                     "S / M rows: once that is a few hundred rows the BLAS runs at full speed and chunking costs "
                     "nothing; where chunks are a few dozen tokens it costs time.")
        data["cpu/over_standard"] = r["seconds"] / r["seconds"][:, :1]
    else:
        res = np.array([[resident_bytes(block, s, d, I, V, 4, 4, 4)] * len(M) for s in S], dtype=float)
        peak = r["workspace_bytes"] + res
        rows = [[f"{s:,}"] + [f"{w / sc.MiB:.2f} / {p / sc.MiB:.2f}" for w, p in zip(ws, ps)]
                for s, ws, ps in zip(S, r["workspace_bytes"], peak)]
        sections.append((f"CPU scale: the {name} alone (minilst_bench_mst, d = {d}, I = {I}, V = {V}, float): "
                         "workspace high-water / block peak, MiB (workspace measured = memory model: "
                         f"{'yes' if ws_ok else '**no**'})", sc.md_table(["S"] + head, rows)))
        data["cpu/block_peak_bytes"] = peak
        # Paper scale: the step workspace high-water of the one-layer Llama-3-8B deck, per paper S and M.
        pm = list(paper)
        pred = np.full((len(PAPER_S), len(pm)), np.nan)
        for i, s in enumerate(PAPER_S):
            for j, m in enumerate(pm):
                p = st.plan(f"gpu_s{s}_m{m}")
                if p:
                    pred[i, j] = sc.plan_mem(p, "workspace")
        rd = 4096, 14336, 128256
        res_gpu = np.array([resident_bytes(block, s, *rd, 2, 2, 4) for s in PAPER_S], dtype=float)
        rows = []
        for i, s in enumerate(PAPER_S):
            if np.all(np.isnan(pred[i])):
                continue
            cells = [f"{s:,}"]
            for j, m in enumerate(pm):
                ours = ("" if np.isnan(pred[i, j]) else
                        f"{pred[i, j] / sc.GiB:.2f} / {(pred[i, j] + res_gpu[i]) / sc.GiB:.2f}")
                theirs = "" if paper[m][i] is None else f" (paper: {paper[m][i]:.2f})"
                cells.append(ours + theirs)
            rows.append(cells)
        sections.append(("Paper scale: Llama-3-8B (one layer, bf16), miniLST predicted step workspace high-water / "
                         "block peak, GiB (the paper's GB beside where available)", sc.md_table(
                             ["S"] + [f"M = {m}" if m != 1 else "standard (M = 1)" for m in pm], rows)))
        data["gpu/workspace_bytes"], data["gpu/block_peak_bytes"] = pred, pred + res_gpu[:, None]
        notes += [
            "Block peak = the workspace high-water (all the block's transient buffers: its chunk's "
            "intermediates, and in the LM head the chunk's logits) + what stays resident while it runs: the "
            "block's [S, d] input, output and gradient tensors and its weights with their gradients (fp32 at "
            "CPU scale; bf16 weights and activations, fp32 gradients at paper scale). That is what "
            "`torch.cuda.max_memory_allocated` around the block alone would report, the paper's measure.",
            "At paper scale the plan runs a whole step of one layer, so its workspace high-water is the "
            "larger of this block's and the rest of the step's (attention, the layer's gradient buffers): the "
            "rows flatten where M is large enough that the block is no longer the largest transient.",
            "miniLST's MLP chunk holds its input, gate, up and activation (d + 3I per token) in the backward, "
            "the forward d + 2I; the LM head a chunk's input and logits (d + V per token), fused with the loss "
            "so the [S, V] logits never exist whole.",
        ]
    notes.insert(0, f"The paper's cells were not available (n/a) for this table; its sequence lengths "
                    f"({', '.join(f'{s:,}' for s in PAPER_S)}) and chunk counts ({', '.join(map(str, paper))}) "
                    "are kept as its layout, and the CPU columns use the same chunk counts.")
    if not ws_ok:
        notes.append("**The measured workspace differs from the memory model's** (see the data).")
    fig, ax = sc.plt.subplots(1, 2, figsize=(11, 4.2))
    for i, s in enumerate(S):
        y = r["seconds"][i] / r["seconds"][i][0] if quantity == "time" else data["cpu/block_peak_bytes"][i] / sc.MiB
        ax[0].plot(M, y, "o-", label=f"S = {s}")
    ax[0].set_xscale("log", base=2), ax[0].set_xlabel("mini-sequences M")
    ax[0].set_ylabel("time / time(M = 1)" if quantity == "time" else "block peak (MiB)")
    ax[0].legend(fontsize=8), ax[0].set_title(f"CPU scale: {name}")
    if quantity == "time":
        for i, s in enumerate(S):
            ax[1].plot(M, r["gflops"][i], "o-", label=f"S = {s}")
        ax[1].axhline(b["sgemm_gflops"], color="k", ls="--", label="SGEMM")
        ax[1].set_xscale("log", base=2), ax[1].set_xlabel("mini-sequences M"), ax[1].set_ylabel("GFLOP/s")
        ax[1].legend(fontsize=8), ax[1].set_title("CPU scale: rate")
    else:
        for i, s in enumerate(PAPER_S):
            if not np.all(np.isnan(data["gpu/block_peak_bytes"][i])):
                ax[1].plot(list(paper), data["gpu/block_peak_bytes"][i] / sc.GiB, "o-", label=f"S = {s:,}")
        ax[1].set_xscale("log", base=2), ax[1].set_xlabel("mini-sequences M")
        ax[1].set_ylabel("block peak (GiB, predicted)"), ax[1].legend(fontsize=7)
        ax[1].set_title("Llama-3-8B, bf16")
    fig.suptitle(f"MsT Table {number}: {name} {quantity} against M")
    sc.finish(st, script, "mst", f"MsT Table {number}: {name}, {quantity} against the mini-sequence count",
              sections, notes, data, fig)
