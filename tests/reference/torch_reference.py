#!/usr/bin/python3
"""Independent PyTorch float64 reference for miniLST tensor dumps.

Reads the HDF5 dump written by the C++ program (root attributes for the model
shape, /micro_tokens, /micro_labels, /loss, /params/<name>, /grads/<name>, and
the attention mask: /doc_starts [n] the packed documents' first positions (0
first), /layer_windows [L] each layer's sliding window w (0: none)),
recomputes the first-step loss (mean over the A micro-steps) and every
parameter gradient with torch autograd in float64, using a plain explicit
S x S masked attention (a different algorithm from the C++ flash kernel), and
compares: loss by |ref-dumped|/|ref|, gradients by ||ref-dumped||_2/||ref||_2.

The mask, computed here from those two alone: token i of document D (the last
start <= i) has rotary position i - start(D); query i sees key j iff
max(start(D), i - w + 1) <= j <= i (w = 0: start(D) <= j <= i). Labels:
label[i] = token[i+1], -100 (ignored) at i = S-1 and at every document's last
token (i = start - 1); the dumped labels are checked against that first.

Exit 0 if every rel_err <= --tol, 1 otherwise, 2 if the file, a dataset or an
expected gradient is missing. A reference gradient that is exactly zero is
reported as a warning (suspicious, but not a failure).

Usage: /usr/bin/python3 tests/reference/torch_reference.py DUMP.h5 [--tol 1e-8]
"""
import argparse, math, os, sys
import h5py, torch

LAYER_PARAMS = ["attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down"]


def param_names(L):
    return ["embed"] + [f"layers.{l}.{p}" for l in range(L) for p in LAYER_PARAMS] + ["final_norm", "lm_head"]


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope(x, theta, pos):  # x: [S, heads, h]; rotate-half, rotary position pos[i] for row i
    h = x.shape[-1]
    inv = theta ** (-2.0 * torch.arange(h // 2, dtype=torch.float64) / h)
    ang = pos.to(torch.float64)[:, None] * inv[None, :]  # [S, h/2]
    c, s = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x1, x2 = x[..., : h // 2], x[..., h // 2:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def doc_start_of(S, starts):  # [S]: the first position of each token's document
    pos = torch.arange(S)
    return starts[torch.searchsorted(starts, pos, right=True) - 1]


def hidden_keys(S, starts, window):  # [S, S] True where key j is hidden from query i
    i, j = torch.arange(S)[:, None], torch.arange(S)[None, :]
    lo = doc_start_of(S, starts)[:, None]
    if window > 0:
        lo = torch.maximum(lo, i - window + 1)
    return (j > i) | (j < lo)


def expected_labels(tokens, starts):
    S = tokens.shape[0]
    labels = torch.full((S,), -100, dtype=torch.long)
    labels[:-1] = tokens[1:]
    for d in starts.tolist():
        if d > 0:
            labels[d - 1] = -100
    return labels


def masked_attention(q, k, v, mask):  # q [S,H,h], k/v [S,G,h], mask [S,S] hidden -> [S,H,h]
    S, H, h = q.shape
    rep = H // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)  # head n -> kv n//rep
    scores = torch.einsum("ihd,jhd->hij", q, k) / math.sqrt(h)
    p = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return torch.einsum("hij,jhd->ihd", p, v)


def micro_loss(P, cfg, tokens, labels):
    S, H, G, eps = tokens.shape[0], cfg["heads"], cfg["kv_heads"], cfg["norm_eps"]
    h = cfg["hidden"] // H
    starts = cfg["doc_starts"]
    pos = torch.arange(S) - doc_start_of(S, starts)  # rotary positions restart per document
    x = P["embed"][tokens]
    for l in range(cfg["layers"]):
        W = lambda n: P[f"layers.{l}.{n}"]
        a = rmsnorm(x, W("attn_norm"), eps)
        q = rope((a @ W("wq")).view(S, H, h), cfg["rope_theta"], pos)
        k = rope((a @ W("wk")).view(S, G, h), cfg["rope_theta"], pos)
        v = (a @ W("wv")).view(S, G, h)
        mask = hidden_keys(S, starts, cfg["layer_windows"][l])
        y = x + masked_attention(q, k, v, mask).reshape(S, H * h) @ W("wo")
        b = rmsnorm(y, W("mlp_norm"), eps)
        x = y + (torch.nn.functional.silu(b @ W("w_gate")) * (b @ W("w_up"))) @ W("w_down")
    logits = rmsnorm(x, P["final_norm"], eps) @ P["lm_head"]
    keep = labels != -100
    nll = torch.logsumexp(logits, -1) - logits.gather(1, labels.clamp(min=0)[:, None])[:, 0]
    return nll[keep].sum() / keep.sum()


def step_loss(P, cfg, micro_tokens, micro_labels):
    A = micro_tokens.shape[0]
    return sum(micro_loss(P, cfg, micro_tokens[a], micro_labels[a]) for a in range(A)) / A


def read_cfg(f):
    cfg = {}
    for k in ["hidden", "layers", "heads", "kv_heads", "intermediate", "vocab", "seq_len", "grad_accum"]:
        cfg[k] = int(f.attrs[k])
    for k in ["rope_theta", "norm_eps"]:
        cfg[k] = float(f.attrs[k])
    return cfg


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump")
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--loss-tol", type=float, default=None, help="the loss's tolerance (default: --tol)")
    args = ap.parse_args()
    if not os.path.isfile(args.dump):
        die(f"dump file not found: {args.dump}")
    with h5py.File(args.dump, "r") as f:
        try:
            cfg = read_cfg(f)
        except KeyError as e:
            die(f"missing root attribute {e}")
        names = param_names(cfg["layers"])
        need = ["micro_tokens", "micro_labels", "loss", "doc_starts", "layer_windows"] + [
            f"{g}/{n}" for g in ("params", "grads") for n in names]
        for d in need:
            if d not in f or not isinstance(f[d], h5py.Dataset):
                die(f"dataset /{d} is missing from {args.dump}")
        load = lambda d: torch.from_numpy(f[d][()]).to(torch.float64)
        P = {n: load(f"params/{n}").requires_grad_(True) for n in names}
        dumped = {n: load(f"grads/{n}") for n in names}
        dumped_loss = float(f["loss"][()])
        toks = torch.from_numpy(f["micro_tokens"][()]).long()
        labs = torch.from_numpy(f["micro_labels"][()]).long()
        cfg["doc_starts"] = torch.from_numpy(f["doc_starts"][()]).long()
        cfg["layer_windows"] = [int(w) for w in f["layer_windows"][()]]
    starts = cfg["doc_starts"]
    if starts.numel() == 0 or starts[0] != 0 or bool((starts[1:] <= starts[:-1]).any()) or starts[-1] >= cfg["seq_len"]:
        die(f"/doc_starts must start at 0 and increase below seq_len: {starts.tolist()}")
    if len(cfg["layer_windows"]) != cfg["layers"] or min(cfg["layer_windows"]) < 0:
        die(f"/layer_windows must hold one window >= 0 per layer: {cfg['layer_windows']}")
    for a in range(toks.shape[0]):
        if not torch.equal(labs[a], expected_labels(toks[a], starts)):
            print(f"reference: micro-step {a}'s dumped labels are not the tokens shifted with document ends "
                  "ignored: FAILED")
            sys.exit(1)
    print(f"reference: {starts.numel()} document(s), layer windows {cfg['layer_windows']}")
    loss = step_loss(P, cfg, toks, labs)
    loss.backward()

    tiny = torch.finfo(torch.float64).tiny
    errs = [("loss", abs(loss.item() - dumped_loss) / max(abs(loss.item()), tiny))]
    for n in names:
        ref = P[n].grad
        if ref.shape != dumped[n].shape:
            die(f"/grads/{n} has shape {tuple(dumped[n].shape)}, expected {tuple(ref.shape)}")
        rn = ref.norm().item()
        if rn == 0.0:
            print(f"warning: reference gradient of {n} is exactly zero (suspicious)")
        errs.append((n, (ref - dumped[n]).norm().item() / max(rn, tiny)))
    loss_tol = args.tol if args.loss_tol is None else args.loss_tol
    tol = lambda n: loss_tol if n == "loss" else args.tol
    for n, e in errs:  # a NaN error compares False against tol, so it fails
        print(f"  {n:<24s} rel_err={e:.1e}  {'ok' if e <= tol(n) else 'FAIL'}")
    worst = max((e for _, e in errs), key=lambda e: math.inf if e != e else e)
    passed = all(e <= tol(n) for n, e in errs)
    print(f"reference: {len(errs)} tensors, max rel_err={worst:.1e}, {'PASSED' if passed else 'FAILED'}")
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
