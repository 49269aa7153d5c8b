#!/usr/bin/env python3
"""The papers' longest sequences beside miniLST's plan, buffer by buffer (docs/validation.md).

  analysis/longest_account.py [--minilst build/minilst] [--source .]

For each longest-sequence row of a seed paper whose system miniLST can express, asks `minilst plan`
for (a) the longest S that fits the paper's budget and (b) the step's memory at the paper's own S
(and again with one layer fewer: a layer's share), and sets beside them the memory the paper's own
system holds at its S, counted term by term from that system's source (Hugging Face's Llama in
eager PyTorch with FlashAttention-2, as MsT ran it): the tensors autograd keeps per layer, the
loss's fp32 logits, the layer a checkpointed backward recomputes. The residual (the budget less
that count) is what the count leaves to the allocator (its cached, fragmented blocks) and to what
the paper does not say. Prints a Markdown table.
"""
import argparse
import json
import subprocess
import sys

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

    def plan(self, deck, sets, extra):
        cmd = [self.minilst, "plan", f"{self.source}/{deck}", "--ranks", "1", "--format", "json"]
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


if __name__ == "__main__":
    main()
