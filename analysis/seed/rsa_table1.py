#!/usr/bin/env python3
"""RSA Table 1: the MLP block's memory per device under tensor and sequence parallelism, the
paper's formulas evaluated beside miniLST's MLP on a ring of N ranks (measured at CPU scale,
predicted at a BERT-Base-sized shape).

    /usr/bin/python3 analysis/seed/rsa_table1.py DIR [--tiny]     (DIR: scripts/bench/seed/rsa_table1.sh's output)
"""
import numpy as np

import seed_common as sc
import seed_papers as sp

# RSA, arXiv 2105.13120, Table 1's Memory column (seed_papers.RSA_TABLE1: elements; B batch, L
# sequence length, H hidden size, N devices), split into its terms: the weights with their gradients
# and Adam states (the H^2 term), and the activations.
PAPER_TEX = {k: v[0] for k, v in sp.RSA_TABLE1.rows.items()}
PAPER_TERMS = {"tensor parallelism": {"states": "32*H**2/N", "activations": "4*B*L*H/N + B*L*H"},
               "sequence parallelism": {"states": "32*H**2", "activations": "5*B*L*H/N"}}
# Section 3.2.2: "there is no communication in the MLP layer" under sequence parallelism; tensor
# parallelism's MLP runs 2 of its 4 collectives per layer, each 2(N-1)*B*Z*(L/N)*A elements.
PAPER_COMM = {"tensor parallelism": "2 * 2*(N-1)*B*Z*(L/N)*A", "sequence parallelism": "0"}
PAPER_CONDITION = "B*L > 32*H"  # sequence parallelism needs less memory (Eq. 5)


def ev(expr, **v) -> float:
    return float(eval(expr, {"__builtins__": {}}, v))


def mlp_bytes(vanilla, full, layers, shape, bpp, model=False):
    """The MLP's state and activation bytes per layer per rank: its 3 d I parameters times the bytes
    per parameter, and the activations `vanilla` keeps beyond `full` (its input, gate, up, act)."""
    d, i = shape
    act = lambda r, m: float(np.max(r.model_memory["activations"] if m else r.memory["activations"]))
    if hasattr(vanilla, "memory"):
        extra = act(vanilla, model) - act(full, model)
    else:  # two plans
        extra = sc.plan_mem(vanilla, "activations") - sc.plan_mem(full, "activations")
    return 3 * d * i * bpp, extra / layers


def main():
    st = sc.parse_args(__doc__)
    first = st.run(next(n for n, r in st.rows.items() if r["kind"] == "run"))
    bpp = sc.states(first) / float(first.attrs["parameters"])  # bytes of model state per parameter
    T = 8 if first.attrs.get("precision") == "double" else (2 if first.attrs.get("precision") == "bf16" else 4)

    def scale_rows(kind, names_n, shape_of, prefix=""):
        """prefix "tp_": miniLST's tensor parallelism (parallel.tensor = N) instead of its ring."""
        rows, out = [], {k: [] for k in ("N", "tp_states", "tp_act", "sp_states", "sp_act", "states", "act",
                                          "act_model", "measured_equals_model")}
        for n in names_n:
            if kind == "cpu":
                v, f = st.run(f"{prefix}cpu_n{n}_vanilla"), st.run(f"{prefix}cpu_n{n}_full")
                cfg = v.config["model"]
                L, layers = int(v.attrs["seq_len"]), cfg["layers"]
                ok = sc.model_matches(v) and sc.model_matches(f)
            else:
                v, f = st.plan(f"{prefix}gpu_n{n}_vanilla"), st.plan(f"{prefix}gpu_n{n}_full")
                if v is None or f is None:
                    continue
                cfg, L, layers, ok = shape_of, v["seq_len"], shape_of["layers"], True
            H, Z = cfg["hidden"], cfg["heads"]
            var = dict(B=1, L=L, H=H, N=n, Z=Z, A=H // Z)
            states, act = mlp_bytes(v, f, layers, (H, cfg["intermediate"]), bpp)
            if prefix:
                states /= n  # (tensor parallel: 1/N of the MLP's columns and rows)
            act_model = mlp_bytes(v, f, layers, (H, cfg["intermediate"]), bpp, model=True)[1] if kind == "cpu" else act
            tp = {k: ev(e, **var) * T for k, e in PAPER_TERMS["tensor parallelism"].items()}
            sp = {k: ev(e, **var) * T for k, e in PAPER_TERMS["sequence parallelism"].items()}
            sp_wins = ev(PAPER_CONDITION, **var) > 0
            formula = tp if prefix else sp  # what miniLST's layout is set beside
            rows.append([n, f"{L:,}", sc.mib(tp["states"]), sc.mib(tp["activations"]), sc.mib(sp["states"]),
                         sc.mib(sp["activations"]), "yes" if sp_wins else "no", sc.mib(states), sc.mib(act),
                         sc.num(act / formula["activations"], ".2f"),
                         sc.mib(ev(PAPER_COMM["tensor parallelism"], **var) * T), "0",
                         ("yes" if ok and act == act_model else "**no**") if kind == "cpu" else "(predicted)"])
            for k, val in zip(out, (n, tp["states"], tp["activations"], sp["states"], sp["activations"], states, act,
                                    act_model, ok and act == act_model)):
                out[k].append(val)
        return rows, out

    def ranks_of(prefix):
        return sorted(int(n[len(prefix):].split("_")[0][1:]) for n in st.rows
                      if n.startswith(prefix) and n.endswith("_vanilla"))

    bert = dict(layers=12, hidden=768, heads=12, intermediate=3072)
    cpu_rows, cpu = scale_rows("cpu", ranks_of("cpu_"), None)
    gpu_rows, gpu = scale_rows("gpu", ranks_of("gpu_"), bert)
    tp_cpu_rows, tp_cpu = scale_rows("cpu", ranks_of("tp_cpu_"), None, "tp_")
    tp_gpu_rows, tp_gpu = scale_rows("gpu", ranks_of("tp_gpu_"), bert, "tp_")
    cols = ["N", "L", "TP: states MiB", "TP: activations MiB", "SP: states MiB", "SP: activations MiB",
            "SP < TP (BL > 32H)", "miniLST: MLP states MiB", "miniLST: MLP activations MiB",
            "miniLST / SP activations", "TP: MLP comm MiB", "SP and miniLST: MLP comm", "measured = model"]
    tp_cols = cols[:9] + ["miniLST / TP activations", "TP: MLP comm MiB", "SP: MLP comm", "measured = model"]
    c = first.config["model"]
    sections = [
        (f"CPU scale: H = {c['hidden']}, {c['heads']} heads, I = {c['intermediate']}, float, a contiguous ring of N "
         "ranks; per layer and rank, formulas x 4 bytes beside miniLST measured (MiB)", sc.md_table(cols, cpu_rows)),
        ("Paper scale: BERT-Base-sized decoder (H = 768, 12 heads, I = 3072, 12 layers, float), predicted "
         "(MiB per layer and rank)", sc.md_table(cols, gpu_rows)),
        ("Tensor parallelism, CPU scale: the same shape with parallel.tensor = N (the MLP's columns split, the "
         "sequence gathered before it), measured (MiB per layer and rank)", sc.md_table(tp_cols, tp_cpu_rows)),
        ("Tensor parallelism, paper scale: the BERT-Base-sized decoder (vocabulary padded to 30720) with "
         "parallel.tensor = N, predicted (MiB per layer and rank)", sc.md_table(tp_cols, tp_gpu_rows)),
    ]
    notes = [
        "TP and SP columns are the paper's formulas with B = 1, in bytes (elements x 4, float); the states term "
        "(32H^2) is the two H x 4H weights with their gradients and two Adam moments. In the first two tables "
        "miniLST's columns are its ring (sequence parallelism), whose MLP runs on the rank's L / N tokens with "
        "the whole weights; in the last two its tensor parallelism (parallel.tensor = N), whose MLP holds 1/N of "
        "the weights' columns and keeps the gathered input whole (BLH, the formula's second term) beside its "
        "1/N of the intermediates (gate, up and SwiGLU output: 3 x 4BLH/N at I = 4H against GeLU's 4BLH/N).",
        "miniLST's MLP activations are measured as what `memory.policy: vanilla` keeps beyond `full` (the MLP's "
        "input, gate, up and SwiGLU output, kept for the backward), per layer; both runs' memory equals the "
        "memory model's to the byte. They fall as 1/N, as the SP formula's do, and the states stay whole.",
        "miniLST's MLP is SwiGLU: three d x I weights (12H^2 parameters at I = 4H, against the GeLU MLP's 8H^2: "
        "x 1.5 the states) and it keeps H + 3I = 13H values per token against the formula's 5H (x 2.6 the "
        "activations), the ratio the miniLST / SP column shows. With `full` (or any policy but vanilla) "
        "miniLST's MLP keeps nothing and recomputes its gate and up from the saved input of the block.",
        "Communication: the MLP under sequence parallelism sends nothing, in the paper and in miniLST (its ring "
        "and gradient traffic belong to the attention and the optimizer step); tensor parallelism's MLP "
        "all-reduces twice per layer.",
    ]
    if not all(cpu["measured_equals_model"]) or not all(tp_cpu["measured_equals_model"]):
        notes.append("**A run's memory or communication differs from its prediction** (see the table).")
    fig, ax = sc.plt.subplots(1, 2, figsize=(11, 4.2))
    for a, d, title in ((ax[0], cpu, "CPU scale (measured)"), (ax[1], gpu, "BERT-Base size (predicted)")):
        if d["N"]:
            a.plot(d["N"], np.asarray(d["tp_act"]) / sc.MiB, "s--", label="TP activations (formula)")
            a.plot(d["N"], np.asarray(d["sp_act"]) / sc.MiB, "o--", label="SP activations (formula)")
            a.plot(d["N"], np.asarray(d["act"]) / sc.MiB, "o-", label="miniLST MLP activations")
            a.plot(d["N"], np.asarray(d["states"]) / sc.MiB, "^-", label="miniLST MLP states")
            a.plot(d["N"], np.asarray(d["tp_states"]) / sc.MiB, "v--", label="TP states (formula)")
            a.set_xscale("log", base=2), a.set_yscale("log")
        a.set_xlabel("N devices"), a.set_ylabel("MiB per layer and device"), a.set_title(title)
        a.legend(fontsize=7)
    fig.suptitle("RSA Table 1: MLP block memory, tensor vs sequence parallelism")
    data = {"paper/formulas": [f"{k}: {v}" for k, v in PAPER_TEX.items()]}
    data.update({f"cpu/{k}": v for k, v in cpu.items()})
    data.update({f"gpu/{k}": v for k, v in gpu.items() if k != "measured_equals_model"})
    data.update({f"tensor/cpu/{k}": v for k, v in tp_cpu.items()})
    data.update({f"tensor/gpu/{k}": v for k, v in tp_gpu.items() if k != "measured_equals_model"})
    t = sp.RSA_TABLE1
    cmp = sc.Compare("activations", "MLP activations per layer and rank: the sequence-parallel formula's term "
                     "(5BLH/N elements x 4 bytes, B = 1) beside miniLST's ring, measured at CPU scale", "MiB", ".2f")
    for i, n in enumerate(cpu["N"]):
        cmp.add(f"N = {n}, L = {int(first.attrs['seq_len']):,}", t, "sequence parallelism", "Memory",
                cpu["act"][i] / sc.MiB, "miniLST's SwiGLU MLP keeps H + 3I = 13H values per token (input, gate, up, "
                "activation) against the GeLU MLP's 5H: 2.6 x at I = 4H", paper=cpu["sp_act"][i] / sc.MiB,
                printed=f"5BLH/N = {cpu['sp_act'][i] / sc.MiB:.2f} MiB")
    tp_cmp = sc.Compare("tensor_activations", "MLP activations per layer and rank under tensor parallelism: the "
                        "formula's 4BLH/N + BLH elements x 4 bytes (B = 1) beside miniLST's parallel.tensor = N, "
                        "measured at CPU scale", "MiB", ".2f")
    for i, n in enumerate(tp_cpu["N"]):
        tp_cmp.add(f"TP N = {n}, L = {int(first.attrs['seq_len']):,}", t, "tensor parallelism", "Memory",
                   tp_cpu["act"][i] / sc.MiB, "miniLST keeps the gathered input whole (BLH, as the formula) and its "
                   "1/N of three SwiGLU intermediates (3 x 4BLH/N at I = 4H) against GeLU's one",
                   paper=tp_cpu["tp_act"][i] / sc.MiB, printed=f"4BLH/N + BLH = {tp_cpu['tp_act'][i] / sc.MiB:.2f} MiB")
    sc.finish(st, "rsa_table1", "rsa", "RSA Table 1: MLP block memory, tensor vs sequence parallelism", sections,
              notes, data, fig, attrs={"bytes_per_element": T, "bytes_per_parameter": bpp}, papers=[t],
              compares=[cmp, tp_cmp])


if __name__ == "__main__":
    main()
