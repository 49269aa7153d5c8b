#!/usr/bin/env bash
# Every seed-paper table script (scripts/bench/seed/*.sh) stays runnable in its
# --tiny form: each writes its HDF5 file (readable, its key datasets non-empty with
# finite figures, every measured = model check true), a PNG (> 10 kB) and a
# table.md. And what the tables hold: each names the paper's table, records every
# cell the paper prints (a count per table and sampled cells, each as printed, all
# of them in table.md, no "n/a"), its ratios of miniLST to the paper are finite
# where both have a figure, the techniques lengthen the sequence, RSA's predicted
# bytes equal the paper's formula, MEMO's alpha lies in [0, 1].
# Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
scripts=(alst_table1 mst_table2 mst_table3 mst_table4 mst_table5 mst_table11 mst_table12 mst_table13 mst_table14
  mst_table15 memo_table4 memo_table7 rsa_table1 rsa_table2)
one() {  # one SCRIPT: its --tiny form, its table.md and PNG
  local s=$1 start=$SECONDS
  OUT="$tmp/$s" MINILST="$MINILST" bash "$MINILST_SOURCE/scripts/bench/seed/$s.sh" --tiny > "$s.log" 2>&1 ||
    { echo "$s.sh --tiny failed:"; tail -30 "$s.log"; return 1; }
  test -s "$tmp/$s/table.md" || { echo "$s: no table.md"; return 1; }
  (($(stat -c %s "$tmp/$s/$s.png") > 10000)) || { echo "$s: $s.png is not over 10 kB"; return 1; }
  echo "$s: $((SECONDS - start)) s"
}
# Two at a time (the test holds both cores; most of a script's work is one process at a time).
pids=() failed=0
for s in "${scripts[@]}"; do
  one "$s" & pids+=($!)
  if ((${#pids[@]} == 2)); then wait "${pids[0]}" || failed=1; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
((failed == 0)) || { echo "FAIL: a seed script failed (above)"; exit 1; }
echo "all scripts: $SECONDS s"
"$PYTHON" - "$tmp" <<'PY'
import math, sys, h5py, numpy as np
# Per script: the paper tables it compares with, how many cells they print, and datasets that must
# hold at least one finite, positive figure.
EXPECT = {
    "alst_table1": (["ALST Table 1", "ALST Section 5.5", "UPipe records"], 38,
                    ["cpu/longest_seq_len", "cpu/step_s", "gpu8/longest_seq_len", "section55/longest_seq_len",
                     "upipe/longest_seq_len"]),
    "mst_table2": (["MsT Table 2"], 3, ["cpu/longest_seq_len", "llama3_8b/longest_seq_len"]),
    "mst_table3": (["MsT Table 3"], 6, ["longest_seq_len_mst"]),
    "mst_table4": (["MsT Table 4"], 4, ["cpu/longest_seq_len", "gpu/longest_seq_len"]),
    "mst_table5": (["MsT Table 5"], 24, ["cpu/tiny/step_s"]),
    "mst_table11": (["MsT Table 11"], 6, ["cpu/longest_seq_len", "llama2_7b/mst/longest_seq_len"]),
    "mst_table12": (["MsT Table 12"], 42, ["cpu/seconds", "cpu/over_standard"]),
    "mst_table13": (["MsT Table 13"], 42, ["cpu/block_peak_bytes", "gpu/block_peak_bytes", "gpu/hf_head_peak_bytes"]),
    "mst_table14": (["MsT Table 14"], 28, ["cpu/seconds", "cpu/over_standard"]),
    "mst_table15": (["MsT Table 15"], 28, ["cpu/block_peak_bytes", "gpu/block_peak_bytes"]),
    "memo_table4": (["MEMO Table 4"], 32, ["cpu/step_s", "cpu/mfu", "cpu/host_bytes"]),
    "memo_table7": (["MEMO Table 7", "MEMO Table 2"], 260, ["cpu/seq_len", "cpu/layer_forward_s",
                                                            "gpu/alpha_host_bound"]),
    "rsa_table1": (["RSA Table 1"], 2, ["cpu/act", "cpu/states", "gpu/act"]),
    "rsa_table2": (["RSA Table 2", "RSA Section 3.2.2"], 8, ["cpu/comm", "cpu/act", "gpu/comm"]),
}
# Sampled cells, (script, table, row, column): as the papers print them.
SAMPLES = {
    ("mst_table2", "MsT Table 2", "vanilla", "Maximum Sequence Length (K)"): "5",
    ("mst_table3", "MsT Table 3", "llama2_13b/recomputation", "Maximum Sequence Length (K)"): "25",
    ("mst_table4", "MsT Table 4", "llama2_7b/mst", "Maximum Sequence Length (K)"): "52",
    ("mst_table5", "MsT Table 5", "llama3_8b/mst/b2", "Training Time Per Step (s)"): "5.80",
    ("mst_table11", "MsT Table 11", "mst", "8"): "128",
    ("mst_table12", "MsT Table 12", "standard", "20000"): "0.2",
    ("mst_table13", "MsT Table 13", "standard", "80000"): "59.92",
    ("mst_table14", "MsT Table 14", "M=8", "1024"): "0.12",
    ("mst_table15", "MsT Table 15", "M=8", "80000"): "11.66",
    ("alst_table1", "ALST Section 5.5", "gpu32/all", "Sequence length (bs=1)"): "15M",
    ("alst_table1", "ALST Table 1", "offload", "Iteration time h:mm:ss"): "0:43:30",
    ("alst_table1", "UPipe records", "gpu8", "Sequence length (bs=1)"): "5M",
    ("memo_table4", "MEMO Table 4", "memo", "896K"): "52.71%",
    ("memo_table4", "MEMO Table 4", "swap", "384K"): "×oohm",
    ("memo_table7", "MEMO Table 7", "8/7B/alpha", "256K"): "1.0",
    ("memo_table7", "MEMO Table 7", "32/30B/alpha", "640K"): "0.25",
    ("memo_table7", "MEMO Table 7", "64/65B/alpha", "384K"): "0.25",
}
strs = lambda d: [x.decode() if isinstance(x, bytes) else str(x) for x in np.asarray(d[()]).ravel()]
bad = []
for script, (tables, count, keys) in EXPECT.items():
    f = h5py.File(f"{sys.argv[1]}/{script}/{script}.h5", "r")
    md = open(f"{sys.argv[1]}/{script}/table.md").read()
    if f.attrs.get("schema") != "minilst-seed-table":
        bad.append(f"{script}: schema {f.attrs.get('schema')!r}")
    if not str(f.attrs.get("title", "")).startswith(tables[0]):
        bad.append(f"{script}: the title {f.attrs.get('title')!r} does not name {tables[0]}")
    names = []
    f.visit(lambda n: names.append(n) if isinstance(f[n], h5py.Dataset) else None)
    for k in keys:
        v = np.asarray(f[k][()], dtype=float) if k in f else np.zeros(0)
        if not (v.size and np.any(np.isfinite(v) & (v > 0))):
            bad.append(f"{script}: {k} has no finite positive figure ({v.tolist() if v.size < 20 else v.shape})")
    for n in names:
        if n.endswith("measured_equals_model") and not np.all(np.asarray(f[n][()]).astype(bool)):
            bad.append(f"{script}: {n} is not all true: {np.asarray(f[n][()]).tolist()}")
    # the paper's cells: every table named, the count printed, each cell in table.md, no n/a
    cells = list(zip(*(strs(f[f"paper/cells/{k}"]) for k in ("table", "row", "column", "printed"))))
    if sorted(set(c[0] for c in cells)) != sorted(tables):
        bad.append(f"{script}: paper tables {sorted(set(c[0] for c in cells))}, expected {tables}")
    if len(cells) != count:
        bad.append(f"{script}: {len(cells)} paper cells, expected {count}")
    missing = [c for c in cells if c[3] not in md]
    if missing:
        bad.append(f"{script}: paper cells not in table.md: {missing[:3]}")
    if "n/a" in md:
        bad.append(f"{script}: table.md has an n/a")
    found = {c[:3]: c[3] for c in cells}
    for (s, *key), want in SAMPLES.items():
        if s == script and found.get(tuple(key)) != want:
            bad.append(f"{script}: {key} is {found.get(tuple(key))!r}, the paper prints {want!r}")
    # miniLST / paper: finite wherever both have a figure (and the paper's is not 0), at least one
    groups = sorted({n.rsplit("/", 1)[0] for n in names if n.startswith("compare/")})
    finite = 0
    for g in groups:
        p, o, r = (np.asarray(f[f"{g}/{k}"][()], dtype=float) for k in ("paper", "minilst", "ratio"))
        both = np.isfinite(p) & np.isfinite(o) & (p != 0)
        if not np.all(np.isfinite(r[both]) & (r[both] > 0)):
            bad.append(f"{script}: {g}/ratio not finite where both have a figure: {r.tolist()}")
        finite += int(both.sum())
    if finite == 0:
        bad.append(f"{script}: no miniLST / paper ratio")
    if script in ("alst_table1", "mst_table2", "mst_table11"):  # each technique lengthens the sequence
        s = np.asarray(f["cpu/longest_seq_len"][()], dtype=float)
        s = s[np.isfinite(s)]
        if not (s.size >= 2 and s[-1] > s[0]):
            bad.append(f"{script}: the last stack does not fit a longer sequence than the first: {s.tolist()}")
    print(f"{script}: {len(names)} datasets, {len(cells)} paper cells, {finite} ratios")
f = h5py.File(f"{sys.argv[1]}/memo_table7/memo_table7.h5", "r")
for k in ("cpu/alpha", "gpu/alpha_rule"):
    a = np.asarray(f[k][()], dtype=float)
    if not (a.size and np.all((a >= 0) & (a <= 1))):
        bad.append(f"memo_table7: {k} outside [0, 1]: {a.tolist()}")
# RSA's seed backward: the predicted ring bytes per layer equal the paper's 8(N-1)BZ(L/N)A (x 4 bytes).
f = h5py.File(f"{sys.argv[1]}/rsa_table2/rsa_table2.h5", "r")
if f.attrs["rsa_seed_backward"]:
    v = np.asarray(strs(f["gpu/variant"]))
    ratio = np.asarray(f["gpu/comm"][()])[v == "rsa"] / np.asarray(f["gpu/comm_formula"][()])[v == "rsa"]
    if not np.allclose(ratio, 1.0, rtol=0, atol=1e-12):
        bad.append(f"rsa_table2: RSA ring bytes / the paper's formula = {ratio.tolist()}, expected 1")
    print(f"rsa_table2: RSA bytes per layer / 8(N-1)BZ(L/N)A = {ratio.tolist()}")
print("\n".join(bad) if bad else "seed tables smoke: ok")
sys.exit(1 if bad else 0)
PY
