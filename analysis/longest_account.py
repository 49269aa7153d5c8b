#!/usr/bin/env python3
"""The papers' longest sequences beside miniLST's plan, buffer by buffer (docs/validation.md).

  analysis/longest_account.py [--minilst build/minilst] [--source .]

For each longest-sequence row of a seed paper, asks `minilst plan` for (a) the longest S that fits the
paper's budget and (b) the step's memory at the paper's own S, and sets beside them the memory the
paper's own system holds at its S, counted term by term from that system's source: Hugging Face's
Llama in eager PyTorch with FlashAttention-2 (MsT; ALST with DeepSpeed ZeRO 3, Ulysses, Liger's loss,
tiled MLP, checkpoint offload): the tensors autograd keeps per layer, the loss's fp32 logits, the
layer a checkpointed backward recomputes; MEMO's Megatron-LM base with its skeletal buffers (at the
paper's length and at the next length of its table, against the A800; and the host rows against the
node's 2 TB). The residual (the budget less that count) is what the count leaves to the allocator (its
cached, fragmented blocks), NCCL and what the paper does not say. Prints Markdown tables.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "seed"))
from seed_papers import MEMO_TABLE2, memo_shape  # noqa: E402  (MEMO's models, one source)

MIB = 1 << 20
K = 1024  # the papers' "K" of tokens


def hf_layer_saved(d, Hh, Gh, I):
    """Bytes per token autograd keeps for one Llama decoder layer of Hugging Face Transformers 4.40
    (bf16, FlashAttention-2): each LlamaRMSNorm its fp32 input (4 d), the bf16 normalized (2 d) and the
    weighted output (2 d), twice; FlashAttention's q, k, v after RoPE and its output; the MLP's gate,
    SiLU(gate), up and their product (2 bytes x I each)."""
    return 2 * (4 + 2 + 2) * d + 2 * (Hh + 2 * Gh) + 2 * Hh + 4 * 2 * I


def hf_loss(V):
    """Bytes per token of Hugging Face's loss at its peak (the backward of the cross-entropy): the fp32
    logits it returns, log-softmax's saved output, its gradient and the gradient it hands back (4 x 4 V)."""
    return 16 * V


class Planner:
    def __init__(self, minilst, source):
        self.minilst, self.source = minilst, source

    def plan(self, deck, sets, extra, ranks=1):
        cmd = [self.minilst, "plan", f"{self.source}/{deck}", "--ranks", str(ranks), "--format", "json"]
        for s in sets:
            cmd += ["--set", s]
        out = subprocess.run(cmd + extra, capture_output=True, text=True)
        if out.returncode not in (0, 1):  # 1: does not fit (still a plan)
            sys.exit(f"error: {' '.join(cmd + extra)}: {out.stderr.strip()}")
        return json.loads(out.stdout)


def budget_mib(p, model_sets, deck):
    """MsT's activation budget: an A100 80GB less plan's reserve, less the bf16 weights and the AdamW
    moments its runs keep on the device (2 + 4 bytes a parameter; the optimizer runs in the backward)."""
    devices = {d["name"]: d for d in json.loads(subprocess.run([p.minilst, "plan", "--device", "list", "--format", "json"],
                                                                capture_output=True, text=True).stdout)["devices"]}
    fit = devices["a100-80gb"]["capacity_mib"] - 4096
    params = p.plan(deck, model_sets + ["parallel.ulysses=1", "parallel.zero=0", "memory.optimizer_offload=false"], [])["memory_bytes"]["weights"] / 2
    return fit - 6 * params / MIB


MST_ROWS = [  # label, deck, model sets, paper S (K), policy sets, the paper's count
    ("Llama3-8B vanilla (MsT Table 2)", "inputs/llama3_8b.yaml", [], 5, ["memory.policy=vanilla"], "vanilla"),
    ("Llama3-8B recomputation (MsT Table 2)", "inputs/llama3_8b.yaml", [], 14, ["memory.policy=hf_checkpoint"], "checkpoint"),
    ("Llama3-8B MsT (MsT Table 2)", "inputs/llama3_8b.yaml", [], 60,
     ["memory.policy=checkpoint", "mst.mlp_chunks=4", "mst.lm_head_chunks=16"], "mst"),
    ("Llama2-7B vanilla (MsT Table 3)", "inputs/llama2_7b.yaml", [], 7, ["memory.policy=vanilla"], "vanilla"),
    ("Llama2-7B recomputation (MsT Table 3)", "inputs/llama2_7b.yaml", [], 45, ["memory.policy=hf_checkpoint"], "checkpoint"),
    ("Llama2-7B MsT (MsT Table 3)", "inputs/llama2_7b.yaml", [], 84,
     ["memory.policy=checkpoint", "mst.mlp_chunks=4", "mst.lm_head_chunks=16"], "mst"),
]


def hf_count(kind, S, m):
    """The paper's system at S tokens, bytes: (per-layer tensors over every layer, one layer recomputed
    in the backward, the loss)."""
    d, L, I, V = m["hidden"], m["layers"], m["intermediate"], m["vocab"]
    Hh, Gh = d, d * m["kv_heads"] // m["heads"]
    layer = hf_layer_saved(d, Hh, Gh, I)
    if kind == "vanilla":
        return L * S * layer, 0, S * hf_loss(V)
    kept = L * S * 2 * d  # each layer's input (bf16)
    if kind == "checkpoint":
        return kept, S * layer, S * hf_loss(V)
    mlp_part = 4 * 2 * I  # MsT: the MLP's tensors of one mini-sequence of 4, the loss of one of 16
    return kept, S * (layer - mlp_part) + S // 4 * mlp_part, S // 16 * hf_loss(V)


def model_of(p, deck, sets):
    text = open(f"{p.source}/{deck}").read()
    m = {}
    for key in ("hidden", "layers", "heads", "kv_heads", "intermediate", "vocab"):
        for line in text.splitlines():
            if line.strip().startswith(key + ":"):
                m[key] = int(line.split(":")[1].split("#")[0])
                break
    for s in sets:
        k, v = s.split("=")
        if k.startswith("model."):
            m[k[6:]] = int(v)
    return m


GIB = 1 << 30
A800_BYTES = 80e9  # an A800 80GB: 80 x 10^9 bytes, 74.5 GiB
MEMO_HOST_BYTES = 2e12  # MEMO's 2 TB of host memory per 8-GPU node

MEMO_ROWS = [  # label, model, paper S, the next S (the paper's mark there), TP, CP, DP, the system's policy
    ("7B, full recomputation + memory plan (MEMO Table 4)", "7B", 640, 768, "oom", 4, 2, 1, "recompute"),
    ("7B, MEMO, 8 GPUs (MEMO Tables 3 and 7, alpha 0)", "7B", 1024, 1152, "oom", 8, 1, 1, "memo"),
]

MEMO_HOST_ROWS = [  # label, model, paper S, the next S (out of host memory there), TP, CP, alpha
    ("7B, full swap + memory plan (MEMO Table 4)", "7B", 256, 384, 4, 2, 1.0),
    ("30B, MEMO, 32 GPUs (MEMO Tables 3 and 7)", "30B", 1280, 1408, 8, 4, 0.0),
]


def memo_dims(model):
    """MEMO's Table 2 row as numbers: layers, h, h_ffn, heads, vocabulary."""
    return tuple(int(c) for c in MEMO_TABLE2.rows[model])


def memo_gpt_params(model, tp):
    """Parameters of MEMO's GPT (its Table 2): per layer the QKV and output projections and the two
    GeLU MLP matrices with their biases and two LayerNorms; the embedding padded Megatron-style to a
    multiple of 128 tp rows, shared with the output layer; the final LayerNorm."""
    L, h, f, _, _ = memo_dims(model)
    V = memo_shape(model, tp)["model.vocab"]
    return L * (4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h) + V * h + 2 * h


def memo_count(model, S, tp, cp, dp, kind):
    """Bytes per GPU MEMO's Megatron-based system holds at its peak (the loss), by term:
    states: bf16 weights, fp32 main gradients, ZeRO-1's fp32 master weights and Adam moments over the
      DP x CP ranks, all over TP: (2 + 4 + 12 / (DP CP)) / TP bytes a parameter;
    layer inputs: full recomputation keeps every layer's input, [s / TP, h] bf16 under Megatron's
      sequence parallelism (MEMO itself offloads them);
    skeletal buffers: a layer's skeletal activations, 16 s h half-precision values over TP (MEMO's
      Figure 5), in buffers allocated before training: one for full recomputation; for MEMO (its
      longest rows run at alpha 0) the input and the attention output double-buffered for their
      copies and one buffer for the recomputed rest (14 s h);
    loss: Megatron's vocabulary-parallel cross-entropy upcasts the [s, V / TP] logits to fp32 beside
      the bf16 ones (and in the backward keeps the fp32 softmax beside the bf16 gradient): 6 bytes an entry;
    head input: the output layer's input kept for its weight gradient, [s / TP, h] bf16.
    s = S / CP tokens per GPU. A layer's transient tensors (planned by MEMO's MIP, sized nowhere in
    the paper), NCCL's buffers and the CUDA context are not counted: the total is a floor."""
    L, h = memo_dims(model)[:2]
    V = memo_shape(model, tp)["model.vocab"]
    s = S * K // cp
    layer_skeletal = 32 * s * h / tp  # 16 s h values, 2 bytes each
    inputs_attn = 4 * s * h / tp  # the input and the attention output: 1 s h value each
    skeletal = layer_skeletal if kind == "recompute" else layer_skeletal + inputs_attn
    return {"states": memo_gpt_params(model, tp) * (2 + 4 + 12 / (dp * cp)) / tp,
            "layer inputs": L * 2 * s * h / tp if kind == "recompute" else 0.0,
            "skeletal buffers": skeletal,
            "loss": 6 * s * V / tp,
            "head input": 2 * s * h / tp}


def memo_host(model, S, tp, cp, alpha):
    """Host bytes of one 8-GPU node under MEMO's swapping (its constraint (3)): the layers but the last
    two each keep the input, the attention output and alpha of the rest on the host, per GPU."""
    L, h = memo_dims(model)[:2]
    s = S * K // cp
    return 8 * (L - 2) * (4 + 28 * alpha) * s * h / tp


H100_MIB = 81559  # an H100 80GB as its driver reports it
ALST_ROWS = [  # label, GPUs, paper S (tokens), Ulysses degree, tiled MLP, checkpoint offload, tiled loss (Liger)
    ("baseline, 8 GPUs (ALST Table 1)", 8, 32_000, 1, False, False, False),
    ("+ tiled logits & loss", 8, 160_000, 1, False, False, True),
    ("+ Ulysses SP for HF", 8, 1_100_000, 8, False, False, True),
    ("+ tiled MLP", 8, 1_200_000, 8, True, False, True),
    ("+ checkpoint offload (no tiled MLP)", 8, 2_400_000, 8, False, True, True),
    ("all five (ALST), 8 GPUs", 8, 3_700_000, 8, True, True, True),
    ("ALST, 1 GPU (Section 5.5; weights offloaded too)", 1, 500_000, 1, True, True, True),
    ("ALST, 32 GPUs (Section 5.5)", 32, 15_000_000, 32, True, True, True),
]


def alst_count(gpus, S, U, tiled_mlp, offload, tiled_loss, m):
    """MiB per GPU ALST's stack (Hugging Face Llama, DeepSpeed ZeRO 3 over the GPUs with AdamW on the host,
    Ulysses over U of them) holds at S tokens, s = S / U a GPU, by term:
    runtime: the CUDA context (ALST's own figure, 1 GiB; NCCL's buffers, "multiple GiB" by ALST, are left out);
    states: ZeRO 3's bf16 weight shard, 2 P / GPUs (none on one GPU, where ALST offloads the weights
      too), and its gathered weights: the output layer (the largest module, 2 V d) and one decoder layer;
    layer inputs: the checkpointed input of each layer, 2 d s (on the host with checkpoint offload);
    recomputed layer: the tensors autograd keeps for one Llama layer (hf_layer_saved), the MLP's in
      ALST's tiles of d tokens when tiled;
    Ulysses: the all-to-all's inputs and outputs of q, k, v and the attention output, 2 x 2 (2 Hh + 2 Gh) s;
    loss: Hugging Face's whole loss (hf_loss) or Liger's fused linear cross-entropy: the input's
      gradient (2 d s), the output layer's weight gradient (2 V d) and one chunk's fp32 logits
      (s / ceil(V / d) tokens)."""
    d, L, I, V = m["hidden"], m["layers"], m["intermediate"], m["vocab"]
    Hh, Gh = d, d * m["kv_heads"] // m["heads"]
    layer_params = 2 * d * Hh + 2 * d * Gh + 3 * d * I + 2 * d
    P = L * layer_params + 2 * V * d + d
    s = S // U
    mlp = 4 * 2 * I
    layer = hf_layer_saved(d, Hh, Gh, I) - (mlp - mlp * min(s, d) / s if tiled_mlp else 0)
    loss = 2 * d * s + 2 * V * d + 4 * V * s / -(-V // d) if tiled_loss else hf_loss(V) * s
    terms = {"runtime": 1024 * MIB, "states": (2 * P / gpus if gpus > 1 else 0) + 2 * V * d + 2 * layer_params,
             "layer inputs": 0 if offload else L * 2 * d * s, "recomputed layer": layer * s,
             "Ulysses": 4 * (2 * Hh + 2 * Gh) * s if U > 1 else 0, "loss": loss}
    return {k: v / MIB for k, v in terms.items()}


def alst_minilst(p, gpus, S, U, tiled_mlp, offload, tiled_loss):
    """miniLST's plan of the row as scripts/bench/seed/alst_table1.sh plans it (ZeRO 3, AdamW on the host,
    ZeRO 2 on one rank; an H100 less plan's reserve, an eighth of ALST's 1.9 TB node each, all of it on
    one GPU): the longest S, and the device MiB at the paper's S."""
    policy = "hf_checkpoint" if not tiled_loss else "checkpoint_offload" if offload else "checkpoint"
    sets = [f"memory.policy={policy}", f"parallel.ulysses={U}", f"mst.mlp_chunks={'auto' if tiled_mlp else 1}",
            f"mst.lm_head_chunks={'auto' if tiled_loss else 1}", "parallel.ulysses_head_chunks=1"]
    sets += ["parallel.zero=2"] if gpus == 1 else []
    budgets = ["--device", "h100-80gb", "--reserve-mib", "4096", "--host-mib", str(int(1.9e12 / min(gpus, 8) / MIB))]
    longest = p.plan("inputs/llama3_8b.yaml", sets, ["--max-seq-len"] + budgets, gpus)["seq_len"]
    at = p.plan("inputs/llama3_8b.yaml", sets + [f"run.seq_len={S}"], budgets, gpus)["device_planned_bytes"] / MIB
    return longest, at


def alst_table(p):
    m = model_of(p, "inputs/llama3_8b.yaml", [])
    print("\n| row (H100s) | paper S | miniLST's longest | miniLST at the paper's S, MiB | ALST's stack at its S, MiB: "
          "runtime + states + layer inputs + recomputed layer + Ulysses + loss = total | residual MiB (81,559 - total) |")
    print("|---|---|---|---|---|---|")
    for label, gpus, S, U, tmlp, off, tloss in ALST_ROWS:
        t = alst_count(gpus, S, U, tmlp, off, tloss, m)
        total = sum(t.values())
        longest, at = alst_minilst(p, gpus, S, U, tmlp, off, tloss)
        print(f"| {label} | {S:,} | {longest:,} ({longest / S:.2f}x) | {at:,.0f} | "
              f"{' + '.join(f'{v:,.0f}' for v in t.values())} = {total:,.0f} | "
              f"{H100_MIB - total:,.0f} ({(H100_MIB - total) / H100_MIB:+.0%}) |")


def pow2_ceil(x):
    return float(1 << (int(x) - 1).bit_length())


def memo_host_table():
    print("\n| row | layout | paper S (next S: out of host memory) | host bytes at the paper's S, GiB: as counted "
          "(each GPU's layer block rounded up to a power of two) | the same at the next S | the node |")
    print("|---|---|---|---|---|---|")
    for label, model, k, nxt, tp, cp, alpha in MEMO_HOST_ROWS:
        L = memo_dims(model)[0]
        cells = []
        for x in (k, nxt):
            total = memo_host(model, x, tp, cp, alpha)
            block = total / (8 * (L - 2))
            cells.append(f"{total / GIB:,.0f} ({8 * (L - 2) * pow2_ceil(block) / GIB:,.0f})")
        print(f"| {label} | TP {tp} x CP {cp}, alpha {alpha:g} | {k}K ({nxt}K) | {cells[0]} | {cells[1]} | "
              f"{MEMO_HOST_BYTES / GIB:,.0f} |")


def memo_minilst(p, model, S, tp, cp, kind):
    """miniLST's plan of the row's layout (TP x a zigzag ring of CP, ZeRO 1, the model in miniLST's
    Llama form: seed_papers.memo_shape): the device bytes at S (the states, the rest) and the longest S
    within the A800's budget less plan's reserve and the model states."""
    sets = [f"{k}={v}" for k, v in memo_shape(model, tp).items()] + [
        f"parallel.tensor={tp}", f"parallel.ring={cp}", "parallel.ulysses=1", "parallel.zero=1",
        "memory.optimizer_offload=false", "run.precision=bf16"]
    sets += ["memory.policy=checkpoint"] if kind == "recompute" else ["memory.policy=offload", "memory.offload_alpha=0"]
    ranks = tp * cp
    at = p.plan("inputs/llama2_7b.yaml", sets + [f"run.seq_len={S * K}"], ["--device", "a100-80gb"], ranks)
    mb = at["memory_bytes"]
    states = mb["weights"] + mb["gradients"] + mb["optimizer"]
    budget = A800_BYTES / MIB - at["reserve_mib"] - states / MIB
    fit = p.plan("inputs/llama2_7b.yaml", sets, ["--max-seq-len", "--activation-mib", f"{budget:.2f}"], ranks)["seq_len"]
    return states, at["device_planned_bytes"] - states, fit


def memo_table(p):
    print("\n| row | layout | paper S (next S) | miniLST's longest | miniLST at the paper's S, GiB: states + the rest | "
          "MEMO's system at the paper's S, GiB: states + layer inputs + skeletal buffers + loss + head input = total "
          "| the same at the next S | the device |")
    print("|---|---|---|---|---|---|---|---|")
    for label, model, k, nxt, mark, tp, cp, dp, kind in MEMO_ROWS:
        states, rest, fit = memo_minilst(p, model, k, tp, cp, kind)
        at, after = (memo_count(model, x, tp, cp, dp, kind) for x in (k, nxt))
        terms = " + ".join(f"{v / GIB:.1f}" for v in at.values())
        print(f"| {label} | TP {tp} x CP {cp} x DP {dp} | {k}K ({nxt}K: {mark}) | {fit:,} ({fit / (k * K):.2f}x) | "
              f"{states / GIB:.1f} + {rest / GIB:.1f} | {terms} = {sum(at.values()) / GIB:.1f} | "
              f"{sum(after.values()) / GIB:.1f} | {A800_BYTES / GIB:.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minilst", default="build/minilst")
    ap.add_argument("--source", default=".")
    a = ap.parse_args()
    p = Planner(a.minilst, a.source)
    base = ["parallel.ulysses=1", "parallel.zero=0", "memory.optimizer_offload=false"]
    print("| row | paper S | miniLST's longest | budget MiB | miniLST at the paper's S, MiB | the paper's system at its S, MiB: "
          "layers' tensors + the recomputed layer + the loss = total | residual MiB (budget - total) |")
    print("|---|---|---|---|---|---|---|")
    for label, deck, msets, paper_k, psets, kind in MST_ROWS:
        sets = base + msets + psets
        budget = budget_mib(p, msets, deck)
        limit = ["--activation-mib", f"{budget:.2f}"]
        longest = p.plan(deck, sets, ["--max-seq-len"] + limit)["seq_len"]
        S = paper_k * K
        at = p.plan(deck, sets + [f"run.seq_len={S}"], limit)
        ours = at["arena_bytes"] / MIB
        m = model_of(p, deck, msets)
        layers, recomputed, loss = (v / MIB for v in hf_count(kind, S, m))
        total = layers + recomputed + loss
        print(f"| {label} | {paper_k}K | {longest:,} ({longest / S:.2f}x) | {budget:,.0f} | {ours:,.0f} | "
              f"{layers:,.0f} + {recomputed:,.0f} + {loss:,.0f} = {total:,.0f} | {budget - total:,.0f} ({(budget - total) / budget:+.0%}) |")
    alst_table(p)
    memo_table(p)
    memo_host_table()


if __name__ == "__main__":
    main()
