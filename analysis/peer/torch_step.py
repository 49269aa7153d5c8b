#!/usr/bin/env python3
"""The peer of miniLST's training step, in PyTorch: the same Llama-style model
(RMSNorm, RoPE on rotate-half pairs, GQA causal attention, SwiGLU, LM head +
cross-entropy over shifted labels), the same shapes, AdamW, on the CPU with the
same thread count (--device cpu, the default) or on a GPU (--device cuda). Eager
PyTorch as a user writes it:
  attention  torch.nn.functional.scaled_dot_product_attention(is_causal=True)
             where this PyTorch has it (2.0 on), GQA by enable_gqa=True (2.5 on)
             or by repeating the kv heads; else (PyTorch 1.13) explicit, with the
             [S, S] scores materialised
  precision  fp32 (the default), or bf16: autocast to bf16 with fp32 master
             weights, gradients and AdamW states
  optimizer  AdamW, fused (fused=True) on CUDA where this PyTorch has it
  LM head    in --lm-head-chunks mini-sequences (default 1: whole), each chunk's
             logits, loss and backward before the next, as miniLST's fused LM head

Each step runs the forward block by block with the boundaries detached, then the
backward block by block in reverse, so every phase is timed on its own, with the
names miniLST uses (on CUDA each timed region starts and ends with
torch.cuda.synchronize()):
  attention  q, k, v -> o (scores, mask, softmax, P V), forward and backward
  mlp        y -> y + SwiGLU(rmsnorm(y)), forward and backward
  lm_head    final norm, logits, cross-entropy, forward and backward
  optimizer  AdamW over all parameters
  step       the whole step (also: embedding, projections, RoPE, residuals)

    /usr/bin/python3 analysis/peer/torch_step.py --config-from METRICS.h5 --steps 4 --threads 1 --out torch.json
    python3 analysis/peer/torch_step.py --config-from METRICS.h5 --steps 6 --device cuda --precision bf16 \
        --lm-head-chunks 17 --out torch.json

The shapes come from a miniLST metrics file's resolved deck (--config-from), or
from --hidden --layers ... flags. Prints and writes JSON: per step and phase,
seconds; the device, its name, the precision, which attention and optimizer ran.
"""
import argparse
import contextlib
import inspect
import json
import math
import platform
import re
import sys
import time

import torch
import torch.nn.functional as F


def load_config(args):
    cfg = {"hidden": args.hidden, "layers": args.layers, "heads": args.heads, "kv_heads": args.kv_heads,
           "intermediate": args.intermediate, "vocab": args.vocab, "seq_len": args.seq_len,
           "rope_theta": 10000.0, "norm_eps": 1e-5, "learning_rate": 3e-4, "weight_decay": 0.1,
           "grad_accum": 1}
    if args.config_from:
        import h5py
        import yaml
        deck = yaml.safe_load(h5py.File(args.config_from, "r").attrs["config"])
        m, r = deck["model"], deck["run"]
        cfg.update(hidden=int(m["hidden"]), layers=int(m["layers"]), heads=int(m["heads"]),
                   kv_heads=int(m["kv_heads"]), intermediate=int(m["intermediate"]), vocab=int(m["vocab"]),
                   rope_theta=float(m["rope_theta"]), norm_eps=float(m["norm_eps"]), seq_len=int(r["seq_len"]),
                   learning_rate=float(r["learning_rate"]), weight_decay=float(r["weight_decay"]),
                   grad_accum=int(r["grad_accum"]))
    return cfg


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, cos, sin):  # x: [S, n, h], rotate-half pairing
    h2 = x.shape[-1] // 2
    x1, x2 = x[..., :h2], x[..., h2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def fused_sdpa(dev):
    """On a GPU, SDPA restricted to its fused kernels (flash, cuDNN, memory-efficient),
    so that a silent fall-back to the math kernel (fp32 scores, O(S^2) memory) is an
    error rather than a slow peer; elsewhere, SDPA's own choice. Returns the context
    manager and the kernels' names (None where not restricted)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # PyTorch >= 2.3
    except ImportError:
        return contextlib.nullcontext, None
    if dev != "cuda":
        return contextlib.nullcontext, None
    names = [n for n in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION") if hasattr(SDPBackend, n)]
    return (lambda: sdpa_kernel([getattr(SDPBackend, n) for n in names])), ", ".join(n.lower() for n in names)


def torch_at_least(major, minor):
    v = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(v[1]), int(v[2])) >= (major, minor)


def device_name(device):
    if device == "cuda":
        return torch.cuda.get_device_name()
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        names = []
    return names[0] if names else platform.processor() or platform.machine()


class Timer:  # seconds per phase; sync() before reading the clock (the GPU runs asynchronously)
    def __init__(self, sync):
        self.seconds, self.sync = {}, sync

    def __call__(self, phase):
        timer = self

        class Scope:
            def __enter__(self):
                timer.sync()
                self.t = time.perf_counter()

            def __exit__(self, *exc):
                timer.sync()
                timer.seconds[phase] = timer.seconds.get(phase, 0.0) + time.perf_counter() - self.t
        return Scope()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config-from", help="a miniLST metrics file: its resolved deck gives the shapes")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=3584)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: autocast to bf16, fp32 master weights")
    ap.add_argument("--lm-head-chunks", type=int, default=1, help="LM head + loss mini-sequences (1: whole)")
    ap.add_argument("--out", help="write the timings as JSON here")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit(f"error: --device cuda: this PyTorch ({torch.__version__}) sees no CUDA device")
    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    c = load_config(args)
    d, L, H, G, I, V, S = (c[k] for k in ("hidden", "layers", "heads", "kv_heads", "intermediate", "vocab", "seq_len"))
    h, group, eps = d // H, H // G, c["norm_eps"]
    if not 1 <= args.lm_head_chunks <= S:
        sys.exit(f"error: --lm-head-chunks {args.lm_head_chunks}: allowed 1 to the sequence length ({S})")
    dev, bf16 = args.device, args.precision == "bf16"
    act = torch.bfloat16 if bf16 else torch.float32  # the activations' type (RoPE's tables follow it)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

    def amp():  # the forward's precision: bf16 autocast, or nothing
        return torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=bf16)

    def weight(*shape):
        return (torch.randn(*shape, device=dev) * 0.02).requires_grad_()

    def ones(n):
        return torch.ones(n, device=dev, requires_grad=True)

    params = {"embed": weight(V, d), "final_norm": ones(d), "lm_head": weight(d, V)}
    for l in range(L):
        params.update({f"{l}.attn_norm": ones(d), f"{l}.wq": weight(d, H * h),
                       f"{l}.wk": weight(d, G * h), f"{l}.wv": weight(d, G * h), f"{l}.wo": weight(H * h, d),
                       f"{l}.mlp_norm": ones(d), f"{l}.w_gate": weight(d, I),
                       f"{l}.w_up": weight(d, I), f"{l}.w_down": weight(I, d)})
    fused = dev == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters
    opt = torch.optim.AdamW(params.values(), lr=c["learning_rate"], betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=c["weight_decay"], **({"fused": True} if fused else {}))
    pos = torch.arange(S, dtype=torch.float64)
    inv_freq = c["rope_theta"] ** (-torch.arange(0, h // 2, dtype=torch.float64) * 2.0 / h)
    angle = pos[:, None] * inv_freq[None, :]
    cos, sin = (t.to(dev, act)[:, None, :] for t in (angle.cos(), angle.sin()))
    sdpa = hasattr(F, "scaled_dot_product_attention")
    gqa = sdpa and torch_at_least(2, 5)  # SDPA takes G kv heads itself (enable_gqa); else they are repeated
    mask = None if sdpa else torch.full((S, S), float("-inf"), device=dev).triu(1)

    fused_only, fused_names = fused_sdpa(dev) if sdpa else (contextlib.nullcontext, None)

    def attention(q, k, v):  # [S, H, h], [S, G, h] -> [S, H*h]
        if not gqa:
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
        if sdpa:  # [1, heads, S, h]: SDPA's fused kernels take batched 4-D tensors only
            qb, kb, vb = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))
            with fused_only():
                o = F.scaled_dot_product_attention(qb, kb, vb, is_causal=True, **({"enable_gqa": True} if gqa else {}))
            return o[0].transpose(0, 1).reshape(S, H * h)
        scores = torch.einsum("ihc,jhc->hij", q, k) / math.sqrt(h) + mask
        return torch.einsum("hij,jhc->ihc", scores.softmax(-1), v).reshape(S, H * h)

    chunks = [(i * S // args.lm_head_chunks, (i + 1) * S // args.lm_head_chunks) for i in range(args.lm_head_chunks)]
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()

    steps = []
    for step in range(args.steps):
        g = torch.Generator().manual_seed(step)
        tokens = torch.randint(0, V, (S,), generator=g)
        labels = torch.cat([tokens[1:], torch.tensor([-100])]).to(dev)
        tokens = tokens.to(dev)
        T = Timer(sync)
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        # forward, block by block, boundaries detached
        x = params["embed"][tokens]
        blocks = []
        for l in range(L):
            p = lambda n: params[f"{l}.{n}"]  # noqa: E731
            xin = x.detach().requires_grad_()
            with amp():
                a = rmsnorm(xin, p("attn_norm"), eps)
                q = rope((a @ p("wq")).view(S, H, h), cos, sin)
                k = rope((a @ p("wk")).view(S, G, h), cos, sin)
                v = (a @ p("wv")).view(S, G, h)
            qd, kd, vd = (t.detach().requires_grad_() for t in (q, k, v))
            with T("attention"), amp():
                o = attention(qd, kd, vd)
            od = o.detach().requires_grad_()
            with amp():
                y = xin + od @ p("wo")
            yd = y.detach().requires_grad_()
            with T("mlp"), amp():
                b = rmsnorm(yd, p("mlp_norm"), eps)
                z = yd + (F.silu(b @ p("w_gate")) * (b @ p("w_up"))) @ p("w_down")
            blocks.append((xin, q, k, v, qd, kd, vd, o, od, y, yd, z))
            x = z
        xf = x.detach().requires_grad_()
        with T("lm_head"):  # mini-sequences: each chunk's logits, loss and backward, then the norm's backward
            with amp():
                xn = rmsnorm(xf, params["final_norm"], eps)
            xnd = xn.detach().requires_grad_()
            loss = 0.0
            for lo, hi in chunks:
                with amp():
                    part = F.cross_entropy(xnd[lo:hi] @ params["lm_head"], labels[lo:hi], ignore_index=-100,
                                           reduction="sum") / (S - 1)
                part.backward()
                loss += part.detach()
            xn.backward(xnd.grad)
        grad = xf.grad
        for xin, q, k, v, qd, kd, vd, o, od, y, yd, z in reversed(blocks):
            with T("mlp"):
                z.backward(grad)
            y.backward(yd.grad)
            with T("attention"):
                o.backward(od.grad)
            torch.autograd.backward([q, k, v], [qd.grad, kd.grad, vd.grad])
            grad = xin.grad
        x_embed = params["embed"][tokens]
        x_embed.backward(grad)
        with T("optimizer"):
            opt.step()
        sync()
        T.seconds["step"] = time.perf_counter() - t0
        T.seconds["loss"] = float(loss)
        steps.append(T.seconds)
        print(f"torch step {step + 1}/{args.steps}: {T.seconds['step']:.3f} s  loss {float(loss):.4f}  " +
              "  ".join(f"{k} {v:.3f}" for k, v in T.seconds.items() if k not in ("step", "loss")), flush=True)
    result = {"peer": "pytorch", "torch_version": torch.__version__, "threads": args.threads, "device": dev,
              "device_name": device_name(dev), "precision": args.precision,
              "attention": (f"sdpa ({fused_names})" if fused_names else "sdpa") if sdpa else "explicit", "gqa": "enable_gqa" if gqa else "repeat_interleave",
              "optimizer": "adamw_fused" if fused else "adamw", "lm_head_chunks": args.lm_head_chunks,
              "config": c, "steps": steps}
    if dev == "cuda":
        result["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
