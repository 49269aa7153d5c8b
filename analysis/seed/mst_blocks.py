"""Shared by MsT Tables 12-15 (analysis/seed/mst_table1[2-5].py): a block (the LM head + loss, or
the MLP) alone against the mini-sequence count M, its time or its memory, from minilst_bench_mst
(cpu_bench.h5) and, for the memory tables, Llama-3-8B predictions (gpu_s<S>_m<M>.json; the LM
head's standard row, Hugging Face's head, gpu_s<S>_hf.json).

The block's peak memory is the workspace high-water (every transient buffer of the block, which the
memory model predicts to the byte) plus what stays resident around the block: its input, output and
gradient tensors of [S, d] (MLP: input, output, output gradient; LM head: input and input gradient,
with the int64 labels) and its weights with their gradients.
"""
import math

import h5py
import numpy as np

import seed_common as sc
import seed_papers as sp

LLAMA3 = dict(d=4096, I=14336, V=128256)  # Llama-3-8B's hidden, MLP and vocabulary sizes


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


def _time_compare(t, b, r, name):
    """The paper's time over its standard row beside miniLST's, at the S and M both have."""
    c = sc.Compare("over_standard", f"{name} time over the standard block (M = 1) at the same S: the paper's "
                   "(A100, Llama-3-8B) beside miniLST's (this CPU, the bench's shape)", "x standard", ".3f")
    S, M = list(b["S"]), list(b["M"])
    for col in t.columns:
        if int(col) not in S or 1 not in M:
            continue
        i = S.index(int(col))
        for row in t.rows:
            m = sp.mst_block_m(row)
            if m == 1 or m not in M:
                continue
            j = M.index(m)
            c.add(f"S = {col}, {row}", t, row, col, r["seconds"][i, j] / r["seconds"][i, M.index(1)],
                  "the paper's cells are rounded to 0.01 s, so its short-S ratios are coarse; a chunk's GEMM has "
                  f"S / M rows on both, of d = {int(b['hidden'])} here against 4096",
                  paper=t.value(row, col) / t.value("standard", col),
                  printed=f"{t.cell(row, col)} / {t.cell('standard', col)}")
    return c


def _memory_compare(st, t, block, name):
    """The paper's GB (read as GiB) beside miniLST's predicted block peak, per printed S and M."""
    c = sc.Compare("peak", f"{name} memory: the paper's (GB, read as GiB) beside miniLST's predicted block peak "
                   "(Llama-3-8B, bf16)", "GiB", ".2f")
    d, I, V = LLAMA3["d"], LLAMA3["I"], LLAMA3["V"]
    for col in t.columns:
        S = int(col)
        res = resident_bytes(block, S, d, I, V, 2, 2, 4)
        for row in t.rows:
            m = sp.mst_block_m(row)
            hf = block == "lm_head" and m == 1
            p = st.plan(f"gpu_s{S}_hf" if hf else f"gpu_s{S}_m{m}")
            if p is None:
                continue
            if hf:
                why = ("the paper's standard head is Hugging Face's; miniLST's Hugging Face head holds the bf16 "
                       "logits, their fp32 upcast and its fp32 gradient at once (10 bytes per logit)")
            elif block == "lm_head":
                why = ("miniLST's fused chunk holds its logits once (2 bytes per logit); its weight gradient is "
                       "fp32 (4 bytes per weight), where the paper's 2.02 GB floor fits bf16 weights and gradients")
            else:
                why = ("miniLST's chunk holds its input, gate, up and activation (d + 3I per token); resident: the "
                       "block's [S, d] tensors, bf16 weights and fp32 gradients (0.98 GiB); the paper's M = 2 to 8 "
                       "rows at short S lie above its standard row")
            c.add(f"S = {col}, {row}", t, row, col, (sc.plan_mem(p, "workspace") + res) / sc.GiB, why)
    return c


def table(script, block, quantity, doc):
    """Writes the MsT table of `block` ('lm_head' | 'mlp') and `quantity` ('time' | 'memory')."""
    t = {("lm_head", "time"): sp.MST_TABLE12, ("lm_head", "memory"): sp.MST_TABLE13,
         ("mlp", "time"): sp.MST_TABLE14, ("mlp", "memory"): sp.MST_TABLE15}[block, quantity]
    st = sc.parse_args(doc)
    b = _bench(st)
    S, M, r = b["S"], b["M"], b[block]
    d, I, V = int(b["hidden"]), int(b["intermediate"]), int(b["vocab"])
    name = "LM head + loss" if block == "lm_head" else "MLP block"
    data = {"cpu/seq_lens": S, "cpu/chunks": M, "cpu/seconds": r["seconds"], "cpu/gflops": r["gflops"],
            "cpu/workspace_bytes": r["workspace_bytes"], "cpu/model_workspace_bytes": r["model_workspace_bytes"],
            "cpu/measured_equals_model": np.array_equal(r["workspace_bytes"], r["model_workspace_bytes"])}
    ws_ok = bool(data["cpu/measured_equals_model"])
    head = [f"M = {m}" if m != 1 else "standard (M = 1)" for m in M]
    sections, notes = [], []
    if quantity == "time":
        cmp = _time_compare(t, b, r, name)
        rows = [[f"{s:,}"] + [f"{x:.4f} ({x / ts[0]:.2f})" for x in ts] for s, ts in zip(S, r["seconds"])]
        sections.append((f"CPU scale: the {name} alone (minilst_bench_mst, d = {d}, I = {I}, V = {V}, float), "
                         "forward + backward, median seconds (in brackets: over standard)",
                         sc.md_table(["S"] + head, rows)))
        notes.append(f"The block runs at up to {np.nanmax(r['gflops']):.0f} GFLOP/s; this machine's SGEMM on the "
                     f"MLP's GEMM shape: {b['sgemm_gflops']:.0f} GFLOP/s. A chunk of S / M tokens is a GEMM of "
                     "S / M rows: once that is a few hundred rows the BLAS runs at full speed and chunking costs "
                     "little; where chunks are a few dozen tokens it costs time. The paper's A100 shows the same "
                     "pattern at its shape: the cost of M falls as S grows.")
        notes.append("Time needs the hardware: the comparison is of ratios over the standard block at the same S, "
                     "not of seconds.")
        data["cpu/over_standard"] = r["seconds"] / r["seconds"][:, :1]
    else:
        cmp = _memory_compare(st, t, block, name)
        res = np.array([[resident_bytes(block, s, d, I, V, 4, 4, 4)] * len(M) for s in S], dtype=float)
        peak = r["workspace_bytes"] + res
        rows = [[f"{s:,}"] + [f"{w / sc.MiB:.2f} / {p / sc.MiB:.2f}" for w, p in zip(ws, ps)]
                for s, ws, ps in zip(S, r["workspace_bytes"], peak)]
        sections.append((f"CPU scale: the {name} alone (minilst_bench_mst, d = {d}, I = {I}, V = {V}, float): "
                         "workspace high-water / block peak, MiB (workspace measured = memory model: "
                         f"{'yes' if ws_ok else '**no**'})", sc.md_table(["S"] + head, rows)))
        data["cpu/block_peak_bytes"] = peak
        pm = sorted({int(n.split("_m")[1]) for n in st.rows if n.startswith("gpu_s") and "_m" in n})
        ps = sorted({int(n.split("_")[1][1:]) for n in st.rows if n.startswith("gpu_s")})
        res_gpu = {s: resident_bytes(block, s, LLAMA3["d"], LLAMA3["I"], LLAMA3["V"], 2, 2, 4) for s in ps}
        peak_gpu = np.array([[sc.plan_mem(st.plan(f"gpu_s{s}_m{m}"), "workspace") + res_gpu[s]
                              if st.plan(f"gpu_s{s}_m{m}") else math.nan for m in pm] for s in ps])
        data.update({"gpu/seq_lens": ps, "gpu/chunks": pm, "gpu/block_peak_bytes": peak_gpu})
        if block == "lm_head":
            hf = [sc.plan_mem(st.plan(f"gpu_s{s}_hf"), "workspace") + res_gpu[s] if st.plan(f"gpu_s{s}_hf")
                  else math.nan for s in ps]
            data["gpu/hf_head_peak_bytes"] = hf
            fused = peak_gpu[:, pm.index(1)] if 1 in pm else [math.nan] * len(ps)
            sections.append(("miniLST's two heads at M = 1, Llama-3-8B (predicted block peak, GiB): Hugging Face's "
                             "(the paper's standard) and miniLST's fused head (its own M = 1)", sc.md_table(
                                 ["S", "Hugging Face head", "fused head", "bytes per logit (HF / fused)"],
                                 [[f"{s:,}", sc.gib(h), sc.gib(f), sc.num((h - res_gpu[s]) / (s * LLAMA3["V"]), ".1f")
                                   + " / " + sc.num((f - res_gpu[s]) / (s * LLAMA3["V"]), ".1f")]
                                  for s, h, f in zip(ps, hf, fused)])))
        notes += [
            "Block peak = the workspace high-water (all the block's transient buffers: its chunk's "
            "intermediates, and in the LM head the chunk's logits) + what stays resident while it runs: the "
            "block's [S, d] input, output and gradient tensors and its weights with their gradients (fp32 at "
            "CPU scale; bf16 weights and activations, fp32 gradients at paper scale).",
            "The paper's GB are read as GiB (2^30 bytes, as PyTorch reports memory): the LM head's 2.02 GB floor "
            "(M = 32, S = 1024) is its bf16 weights and their bf16 gradient, 2 x 0.98 GiB.",
            "At paper scale the plan runs a whole step of one layer, so its workspace high-water is the larger of "
            "this block's and the rest of the step's (attention, the layer's gradient buffers): the rows flatten "
            "where M is large enough that the block is no longer the largest transient.",
        ]
        if block == "lm_head":
            notes.append("The standard row (M = 1) is Hugging Face's head, as the paper measured it "
                         "(`memory.policy: hf_checkpoint`), not miniLST's fused head at M = 1, which never holds more "
                         "than one copy of the logits (the section above gives both).")
    if not ws_ok:
        notes.append("**The measured workspace differs from the memory model's** (see the data).")
    fig, ax = sc.plt.subplots(1, 2, figsize=(11, 4.2))
    for i, s in enumerate(S):
        y = r["seconds"][i] / r["seconds"][i][0] if quantity == "time" else data["cpu/block_peak_bytes"][i] / sc.MiB
        ax[0].plot(M, y, "o-", label=f"S = {s}")
    ax[0].set_xscale("log", base=2), ax[0].set_xlabel("mini-sequences M")
    ax[0].set_ylabel("time / time(M = 1)" if quantity == "time" else "block peak (MiB)")
    ax[0].legend(fontsize=8), ax[0].set_title(f"CPU scale: {name}")
    pm_paper = [sp.mst_block_m(row) for row in t.rows]
    for k, col in enumerate(t.columns):
        y = [t.value(row, col) for row in t.rows]
        if quantity == "time":
            y = np.asarray(y) / y[0]
        ax[1].plot(pm_paper, y, "s--", color=f"C{k}", alpha=0.6, label=f"paper S = {col}")
    if quantity == "memory":
        for k, s in enumerate(data["gpu/seq_lens"]):
            col = str(s)
            ax[1].plot(data["gpu/chunks"], data["gpu/block_peak_bytes"][k] / sc.GiB, "o-",
                       color=f"C{t.columns.index(col)}" if col in t.columns else "k", label=f"miniLST S = {s}")
    ax[1].set_xscale("log", base=2), ax[1].set_xlabel("mini-sequences M"), ax[1].legend(fontsize=6)
    ax[1].set_ylabel("time / time(standard)" if quantity == "time" else "GB (paper) / GiB (miniLST predicted)")
    ax[1].set_title(f"{t.name}, Llama-3-8B")
    fig.suptitle(f"{t.name}: {name} {quantity} against M")
    sc.finish(st, script, "mst", f"{t.name}: {name}, {quantity} against the mini-sequence count", sections, notes,
              data, fig, papers=[t], compares=[cmp])
