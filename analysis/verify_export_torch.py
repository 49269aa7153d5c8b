#!/usr/bin/env python3
"""Checks a `minilst verify --export` file with PyTorch: the worked example of docs/verify.md.

For every layer and micro-step of the exported reference step it takes the exported q, k, v
(after RoPE), builds the attention mask from the exported document ids and the layer's sliding
window alone (key j visible to query i iff doc_id[j] == doc_id[i], j <= i and, with a window
w > 0, i - j < w), runs PyTorch attention on them and compares with the exported output o and
log-sum-exp lse; then back-propagates the exported output gradient `do` and compares the
gradients with the exported dq, dk, dv. Each layer's mask is also checked against its
exported q_lo (the first key each query sees).

Attention: torch.nn.functional.scaled_dot_product_attention with the boolean mask where this
PyTorch has it (2.0 and later); PyTorch 1.13 has no SDPA, and then an explicit masked softmax
(scores = q k^T / sqrt(h), -inf where masked, softmax, times v) computes the same thing. The
line printed first says which ran. GQA: query head n reads kv head n // (H / G).

Exit 0 when every relative L2 error ||torch - exported|| / ||exported|| is at most --tol
(default 1e-10: the export is float64), 1 otherwise, 2 for an unreadable file.

Usage: /usr/bin/python3 analysis/verify_export_torch.py EXPORT.h5 [--tol 1e-10]
"""
import argparse
import math
import sys

import h5py
import torch
import torch.nn.functional as F

HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


def visible(doc_ids, window):
    """[S, S] boolean: True where query i may attend to key j."""
    S = doc_ids.shape[0]
    i = torch.arange(S)[:, None]
    j = torch.arange(S)[None, :]
    ok = (doc_ids[:, None] == doc_ids[None, :]) & (j <= i)
    if window > 0:
        ok &= (i - j) < window
    return ok


def attention(q, k, v, mask):
    """q [S, H, h], k, v [S, G, h], mask [S, S] -> o [S, H, h], lse [S, H]."""
    H, G, h = q.shape[1], k.shape[1], q.shape[2]
    k = k.repeat_interleave(H // G, dim=1)
    v = v.repeat_interleave(H // G, dim=1)
    qh, kh, vh = (t.transpose(0, 1) for t in (q, k, v))  # [H, S, h]
    scores = (qh @ kh.transpose(1, 2)) / math.sqrt(h)
    lse = torch.logsumexp(scores.masked_fill(~mask, float("-inf")), dim=-1).transpose(0, 1)
    if HAVE_SDPA:
        o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask)
    else:
        o = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ vh
    return o.transpose(0, 1), lse


def rel(a, b):
    nb = b.norm().item()
    d = (a - b).norm().item()
    return 0.0 if d == 0 else (d / nb if nb > 0 else math.inf)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("export")
    ap.add_argument("--tol", type=float, default=1e-10)
    args = ap.parse_args()
    try:
        f = h5py.File(args.export, "r")
    except OSError as e:
        print(f"error: cannot read {args.export}: {e}", file=sys.stderr)
        return 2
    with f:
        if f.attrs.get("schema") != "minilst-verify-export":
            print(f"error: {args.export} is not a minilst verify export", file=sys.stderr)
            return 2
        L, M = int(f.attrs["layers"]), int(f.attrs["micro_steps"])
        doc_ids = torch.from_numpy(f["inputs/doc_ids"][()])
        windows = [int(w) for w in f["inputs/layer_windows"][()]]
        S = doc_ids.shape[0]
        how = ("scaled_dot_product_attention" if HAVE_SDPA
               else f"explicit masked softmax (torch {torch.__version__} has no SDPA)")
        print(f"attention: {how}, S={S}, {int(doc_ids.max()) + 1} documents, layer windows {windows}")
        worst, failed = 0.0, False
        for l in range(L):
            g = f[f"layers/{l}"]
            mask = visible(doc_ids, windows[l])
            q_lo = torch.from_numpy(g["q_lo"][()])
            first = mask.float().argmax(dim=1)  # the first visible key of each query
            mask_ok = bool((first == q_lo).all()) and bool(mask.sum(1).eq(torch.arange(S) - q_lo + 1).all())
            print(f"  layer {l} mask (doc ids, window {windows[l]}) equals its exported q_lo: "
                  f"{'ok' if mask_ok else 'FAIL'}")
            failed |= not mask_ok
            errs = {n: 0.0 for n in ("o", "lse", "dq", "dk", "dv")}
            for m in range(M):
                q, k, v = (torch.from_numpy(g[n][m]).requires_grad_(True) for n in ("q", "k", "v"))
                o, lse = attention(q, k, v, mask)
                o.backward(torch.from_numpy(g["do"][m]))
                got = {"o": o.detach(), "lse": lse.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}
                for n in errs:
                    errs[n] = max(errs[n], rel(got[n], torch.from_numpy(g[n][m])))
            for n, e in errs.items():
                ok = e <= args.tol  # NaN fails
                failed |= not ok
                worst = max(worst, e) if e == e else math.inf
                print(f"  layer {l} {n:<4s} rel_err={e:.2e} {'ok' if ok else 'FAIL'}")
    print(f"export check: {L} layers x {M} micro-steps, max rel_err={worst:.2e}, {'FAILED' if failed else 'PASSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
