"""The peer of miniLST's training step, in PyTorch: the same Llama-style model
(RMSNorm, RoPE on rotate-half pairs, GQA causal attention, SwiGLU, LM head +
cross-entropy over shifted labels), the same shapes, AdamW, on the CPU with the
same thread count. Eager PyTorch as a user writes it: attention materialises the
[S, S] scores (PyTorch 1.13 has no fused CPU attention).

Each step runs the forward block by block with the boundaries detached, then the
backward block by block in reverse, so every phase is timed on its own, with the
names miniLST uses:
  attention  q, k, v -> o (scores, mask, softmax, P V), forward and backward
  mlp        y -> y + SwiGLU(rmsnorm(y)), forward and backward
  lm_head    final norm, logits, cross-entropy, forward and backward
  optimizer  AdamW over all parameters
  step       the whole step (also: embedding, projections, RoPE, residuals)

    /usr/bin/python3 analysis/peer/torch_step.py --config-from METRICS.h5 --steps 4 --threads 1 --out torch.json

The shapes come from a miniLST metrics file's resolved deck (--config-from), or
from --hidden --layers ... flags. Prints and writes JSON: per step and phase, seconds.
"""
import argparse
import json
import math
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


class Timer:
    def __init__(self):
        self.seconds = {}

    def __call__(self, phase):
        timer = self

        class Scope:
            def __enter__(self):
                self.t = time.perf_counter()

            def __exit__(self, *exc):
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
    ap.add_argument("--out", help="write the timings as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    c = load_config(args)
    d, L, H, G, I, V, S = (c[k] for k in ("hidden", "layers", "heads", "kv_heads", "intermediate", "vocab", "seq_len"))
    h, group, eps = d // H, H // G, c["norm_eps"]

    def weight(*shape):
        return (torch.randn(*shape) * 0.02).requires_grad_()

    params = {"embed": weight(V, d), "final_norm": torch.ones(d, requires_grad=True), "lm_head": weight(d, V)}
    for l in range(L):
        params.update({f"{l}.attn_norm": torch.ones(d, requires_grad=True), f"{l}.wq": weight(d, H * h),
                       f"{l}.wk": weight(d, G * h), f"{l}.wv": weight(d, G * h), f"{l}.wo": weight(H * h, d),
                       f"{l}.mlp_norm": torch.ones(d, requires_grad=True), f"{l}.w_gate": weight(d, I),
                       f"{l}.w_up": weight(d, I), f"{l}.w_down": weight(I, d)})
    opt = torch.optim.AdamW(params.values(), lr=c["learning_rate"], betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=c["weight_decay"])
    pos = torch.arange(S, dtype=torch.float64)
    inv_freq = c["rope_theta"] ** (-torch.arange(0, h // 2, dtype=torch.float64) * 2.0 / h)
    angle = pos[:, None] * inv_freq[None, :]
    cos, sin = angle.cos().float()[:, None, :], angle.sin().float()[:, None, :]
    mask = torch.full((S, S), float("-inf")).triu(1)

    def attention(q, k, v):  # [S, H, h], [S, G, h] -> [S, H*h]
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = torch.einsum("ihc,jhc->hij", q, k) / math.sqrt(h) + mask
        return torch.einsum("hij,jhc->ihc", scores.softmax(-1), v).reshape(S, H * h)

    steps = []
    for step in range(args.steps):
        g = torch.Generator().manual_seed(step)
        tokens = torch.randint(0, V, (S,), generator=g)
        labels = torch.cat([tokens[1:], torch.tensor([-100])])
        T = Timer()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        # forward, block by block, boundaries detached
        x = params["embed"][tokens]
        blocks = []
        for l in range(L):
            p = lambda n: params[f"{l}.{n}"]  # noqa: E731
            xin = x.detach().requires_grad_()
            a = rmsnorm(xin, p("attn_norm"), eps)
            q = rope((a @ p("wq")).view(S, H, h), cos, sin)
            k = rope((a @ p("wk")).view(S, G, h), cos, sin)
            v = (a @ p("wv")).view(S, G, h)
            qd, kd, vd = (t.detach().requires_grad_() for t in (q, k, v))
            with T("attention"):
                o = attention(qd, kd, vd)
            od = o.detach().requires_grad_()
            y = xin + od @ p("wo")
            yd = y.detach().requires_grad_()
            with T("mlp"):
                b = rmsnorm(yd, p("mlp_norm"), eps)
                z = yd + (F.silu(b @ p("w_gate")) * (b @ p("w_up"))) @ p("w_down")
            blocks.append((xin, q, k, v, qd, kd, vd, o, od, y, yd, z))
            x = z
        xf = x.detach().requires_grad_()
        with T("lm_head"):
            logits = rmsnorm(xf, params["final_norm"], eps) @ params["lm_head"]
            loss = F.cross_entropy(logits, labels, ignore_index=-100)
            loss.backward()
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
        T.seconds["step"] = time.perf_counter() - t0
        T.seconds["loss"] = float(loss)
        steps.append(T.seconds)
        print(f"torch step {step + 1}/{args.steps}: {T.seconds['step']:.3f} s  loss {float(loss):.4f}  " +
              "  ".join(f"{k} {v:.3f}" for k, v in T.seconds.items() if k not in ("step", "loss")), flush=True)
    result = {"peer": "pytorch", "torch_version": torch.__version__, "threads": args.threads, "config": c,
              "steps": steps}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
