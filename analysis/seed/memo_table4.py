#!/usr/bin/env python3
"""MEMO Table 4: full recomputation without and with the memory plan, full swapping and MEMO's
token-wise mix, by MFU, beside miniLST's memory.policy offload at alpha 0 (planner none and plan), 1
and auto (measured at CPU scale behind a capped copy engine) and the longest sequence of each row
predicted for MEMO's 7B on 8 ranks.

    /usr/bin/python3 analysis/seed/memo_table4.py DIR [--tiny]     (DIR: scripts/bench/seed/memo_table4.sh's output)
"""
import math

import numpy as np

import seed_common as sc
import seed_papers as sp

ROWS = ["full", "checkpoint", "recompute_noplan", "recompute", "swap", "memo"]  # checkpoint: not in --tiny
ABLATION = ["recompute_noplan", "recompute", "swap"]  # compared with the MEMO row


def longest_printed(t, row):
    """The paper's longest S of a row: its last column with an MFU (and whether the table ends there)."""
    cols = [c for c in t.columns if math.isfinite(t.value(row, c))]
    return cols[-1], cols[-1] == t.columns[-1]


def main():
    st = sc.parse_args(__doc__)
    t = sp.MEMO_TABLE4
    cap, act, host = st.value("cap_gbs"), st.value("activation_budget_mib"), st.value("host_mib")
    rows, data = [], {k: [] for k in ("alpha", "step_s", "mfu", "offload_wait_s", "recompute_s",
                                      "activations_bytes", "host_bytes", "measured_equals_model")}
    full = st.run("full")
    names = [n for n in ROWS if st.kind(n) == "run"]  # --tiny runs no checkpoint row
    for n in names:
        r = st.run(n)
        alpha, ok = r.attrs.get("offload_alpha"), sc.model_matches(r)
        step, wait, rec = sc.step_s(r), sc.phase_s(r, "offload_wait"), sc.phase_s(r, "recompute")
        rows.append([st.rows[n]["label"], sc.num(alpha, ".3f", ""), sc.num(step, ".4g"),
                     f"{step / sc.step_s(full):.3f}", sc.num(r.attrs.get("mfu"), ".3f"), sc.num(wait, ".4f", "0"),
                     sc.num(rec, ".4f", "0"), sc.mib(sc.mem(r, "activations")), sc.mib(sc.mem(r, "host_offload")),
                     "yes" if ok else "**no**"])
        for k, v in zip(data, (sc.nan(alpha), step, sc.nan(r.attrs.get("mfu")), wait, rec,
                               sc.mem(r, "activations"), sc.mem(r, "host_offload"), ok)):
            data[k].append(v)
    step = dict(zip(names, data["step_s"]))

    # MFU of each ablation row over MEMO's at 64K (the paper) and at the CPU scale (miniLST: same model
    # FLOPs per step, so the MFU ratio is MEMO's step time over the row's).
    rel = sc.Compare("mfu_over_memo", "MFU over the MEMO row's: the paper's at 64K (a link too slow to swap a "
                     "layer's activations behind its compute) beside miniLST's behind the capped copy engine",
                     "x MEMO", ".3f")
    why = {"recompute_noplan": "miniLST's arena (memory.planner plan) against a buffer per request: on a CPU an "
                               "allocation costs little, where the paper's unplanned run fragments and reorganises "
                               "the GPU's memory",
           "recompute": "both recompute every token's tensors from the layer input and attention output",
           "swap": "both move every tensor behind a link slower than the layer's compute: the wait is the cost"}
    for n in ABLATION:
        rel.add(t.printed_rows[n], t, n, "64K", step["memo"] / step[n], why[n],
                paper=t.value(n, "64K") / t.value("memo", "64K"),
                printed=f"{t.cell(n, '64K')} / {t.cell('memo', '64K')}")

    # The longest sequence of each row: the paper's last MFU column beside miniLST's prediction.
    longest = sc.Compare("longest", f"Longest sequence, 7B on 8 GPUs (TP 4 x CP 2; miniLST: parallel.tensor 4 x ring 2, "
                         f"{act:,.0f} MiB of activations per GPU, {host:,.0f} MiB of host): the paper's last column "
                         "with an MFU beside miniLST's predicted longest S", "tokens", ",.0f")
    plans = {"recompute_noplan": "gpu_recompute_noplan", "recompute": "gpu_recompute", "swap": "gpu_swap",
             "memo": "gpu_recompute"}
    lwhy = {"recompute_noplan": "miniLST's prediction does not model fragmentation: without the plan it is the "
                                "planned figure, where the paper's unplanned run stops at 384K",
            "recompute": "device-bound: only each layer's input and attention output leave the GPU",
            "swap": "host-bound: every skeletal activation in host memory",
            "memo": "MEMO lowers alpha as S grows, down to 0: its longest S is the full-recomputation row's; the "
                    "paper's table ends at 896K (its Table 3 reaches 1024K with TP 8)"}
    for n in ["recompute_noplan", "recompute", "swap", "memo"]:
        col, open_end = longest_printed(t, n)
        p = st.plan(plans[n])
        longest.add(t.printed_rows[n], t, n, col, p["seq_len"] if p else None, lwhy[n],
                    paper=sp.memo_tokens(col), printed=f"{'at least ' if open_end else ''}{col} ({t.cell(n, col)})",
                    ours_text=None if p else "skipped: " + st.why(plans[n]))
    shape = (f"{full.cfg('model', 'layers')} layers, d = {full.cfg('model', 'hidden')}, "
             f"S = {full.attrs.get('seq_len')}, {full.attrs.get('precision')}")
    sections = [(f"CPU scale: one rank ({shape}); the offload rows behind a copy engine capped at {cap:.3g} GB/s",
                 sc.md_table(["row", "alpha", "step s", "x full", "MFU", "offload wait s", "recompute s",
                              "activations MiB", "host MiB", "measured = model"], rows))]
    notes = [
        "miniLST's rows: `memory.policy: offload` swaps each layer's input x, the attention output o and its "
        "log-sum-exp rows, and of q, k, v, y and the MLP's tensors the first alpha S tokens; the other tokens are "
        "recomputed token-wise from x and o, without attention. alpha = 1 is full swapping, alpha = 0 full "
        "recomputation (except x and o, as in MEMO), auto MEMO's rule: the largest alpha whose copy hides behind "
        "one layer's forward (and fits the host budget). `memory.planner: none` gives every buffer its own "
        "allocation instead of the planned arena. `checkpoint` is the Megatron-style baseline: the whole layer, "
        "attention included, recomputed from x.",
        "The cap models a host link slower than full swapping needs, MEMO's regime at short sequences (its text: "
        "a layer's whole swap hides behind its compute only beyond 192K tokens with TP 8 on 8 GPUs).",
        "MFU here is model FLOPs over the GEMM rate this CPU measured at start, not a GPU's peak; every row has the "
        "same model FLOPs, so the MFU ratio of two rows is the inverse ratio of their step times.",
        "Paper scale: MEMO's 7B is a GPT (multi-head attention, GeLU MLP of 16384); miniLST predicts it with a "
        "SwiGLU MLP of 11008 (the same parameter count), its vocabulary padded to 50688 as Megatron pads it for "
        "TP 4, and MEMO's own layout: tensor parallelism 4 (with sequence parallelism) x a context-parallel ring "
        "of 2. The activation budget is an A800's 80 GB (`minilst plan --device "
        "a100-80gb`: 81,920 MiB) less a 4,096 "
        "MiB reserve, less the model states TP 4 leaves on a GPU (3 bytes per parameter: bf16 weights 2, fp32 "
        "gradients 4, optimizer 12 sharded over DP x CP = 2, all over TP = 4); the host budget is MEMO's 2 TB per "
        "8 GPUs.",
    ]
    best = min(("recompute", "swap", "memo"), key=lambda n: step[n])
    if best == "memo":
        notes.append("As in the paper, MEMO's mix is the fastest of the three: full swapping waits on the link, "
                     "full recomputation pays for every token, the mix hides its copy and recomputes the rest.")
    else:
        notes.append(f"Here the {st.rows[best]['label']} row is the fastest of the three, not MEMO's mix: MEMO's rule "
                     "takes the largest alpha whose copy hides behind a layer's compute, and does not weigh what a "
                     "hidden copy still costs against the recompute it saves. On this CPU the copy engine is a host "
                     "thread that shares the cores with compute, so a hidden copy is not free; on a GPU the copy "
                     "runs on its own engine.")
    notes += sc.mfu_note([st.run(n) for n in names])
    if not all(data["measured_equals_model"]):
        notes.append("**A run's memory or communication differs from its prediction** (see the table).")
    fig, ax = sc.plt.subplots(1, 2, figsize=(12, 4.2))
    x = np.arange(len(names))
    short = {"full": "full", "checkpoint": "checkpoint", "recompute_noplan": "recompute\nno plan",
             "recompute": "recompute\n(a=0)", "swap": "swap\n(a=1)", "memo": "MEMO\n(auto)"}
    labels = [short[n] for n in names]
    steps = np.asarray(data["step_s"])
    wait = np.nan_to_num(np.asarray(data["offload_wait_s"]))
    rec = np.nan_to_num(np.asarray(data["recompute_s"]))
    ax[0].bar(x, steps - wait - rec, 0.6, label="compute")
    ax[0].bar(x, rec, 0.6, bottom=steps - wait - rec, label="recompute")
    ax[0].bar(x, wait, 0.6, bottom=steps - wait, label="offload wait")
    ax[0].set_xticks(x, labels, fontsize=7), ax[0].set_ylabel("step time (s)"), ax[0].legend(fontsize=8)
    ax[0].set_title(f"CPU scale, link capped at {cap:.3g} GB/s")
    for n, mk in zip(["recompute_noplan", "recompute", "swap", "memo"], "v^so"):
        ax[1].plot([sp.memo_tokens(c) for c in t.columns], [t.value(n, c) for c in t.columns], mk + "-",
                   label=t.printed_rows[n][:40])
    ax[1].set_xscale("log", base=2), ax[1].set_xlabel("S (tokens)"), ax[1].set_ylabel("MFU")
    ax[1].legend(fontsize=6), ax[1].set_title(f"{t.name} (7B, 8 A800s)")
    fig.suptitle(f"{t.name}: memory plan, swap, recompute and the token-wise mix")
    data = {f"cpu/{k}": v for k, v in data.items()}
    data["rows"] = names
    sc.finish(st, "memo_table4", "memo", f"{t.name}: memory plan, full swap, full recompute and MEMO", sections,
              notes, data, fig, attrs={"cap_gbs": cap}, papers=[t], compares=[rel, longest])


if __name__ == "__main__":
    main()
