#!/usr/bin/env bash
# Every seed-paper table script (scripts/bench/seed/*.sh) stays runnable in its
# --tiny form: each writes its HDF5 file (readable, its key datasets non-empty with
# finite figures, every measured = model check true), a PNG (> 10 kB) and a
# table.md; plus a few checks of what each table shows (the techniques lengthen
# the sequence, RSA's predicted bytes equal the paper's formula, MEMO's alpha
# follows its rule). Environment (set by ctest): MINILST, MINILST_SOURCE, PYTHON.
source "$(dirname "$0")/common.sh"
scripts=(alst_table1 mst_table2 mst_table3 mst_table4 mst_table11 mst_table12 mst_table13 mst_table14
  mst_table15 memo_table4 memo_table7 rsa_table1 rsa_table2)
for s in "${scripts[@]}"; do
  start=$SECONDS
  OUT="$tmp/$s" MINILST="$MINILST" bash "$MINILST_SOURCE/scripts/bench/seed/$s.sh" --tiny > "$s.log" 2>&1 ||
    { echo "$s.sh --tiny failed:"; tail -30 "$s.log"; exit 1; }
  test -s "$tmp/$s/table.md" || { echo "$s: no table.md"; exit 1; }
  (($(stat -c %s "$tmp/$s/$s.png") > 10000)) || { echo "$s: $s.png is not over 10 kB"; exit 1; }
  echo "$s: $((SECONDS - start)) s"
done
"$PYTHON" - "$tmp" <<'PY'
import sys, h5py, numpy as np
# Per script: datasets that must hold at least one finite, positive figure.
KEY = {
    "alst_table1": ["cpu/longest_seq_len", "cpu/step_s", "gpu8/longest_seq_len"],
    "mst_table2": ["cpu/longest_seq_len", "llama3_8b/longest_seq_len"],
    "mst_table3": ["cpu/longest_seq_len", "gemma2/longest_seq_len"],
    "mst_table4": ["cpu/step_s", "cpu/mfu", "llama3_8b/device_bytes"],
    "mst_table11": ["cpu/longest_seq_len", "llama2_7b/mst/longest_seq_len"],
    "mst_table12": ["cpu/seconds", "cpu/over_standard"],
    "mst_table13": ["cpu/block_peak_bytes", "gpu/workspace_bytes"],
    "mst_table14": ["cpu/seconds", "cpu/over_standard"],
    "mst_table15": ["cpu/block_peak_bytes", "gpu/workspace_bytes"],
    "memo_table4": ["cpu/step_s", "cpu/mfu", "cpu/host_bytes"],
    "memo_table7": ["cpu/seq_len", "cpu/layer_forward_s", "gpu/alpha_host_bound"],  # alpha may be 0
    "rsa_table1": ["cpu/act", "cpu/states", "gpu/act"],
    "rsa_table2": ["cpu/comm", "cpu/act", "gpu/comm"],
}
bad = []
for script, keys in KEY.items():
    f = h5py.File(f"{sys.argv[1]}/{script}/{script}.h5", "r")
    if f.attrs.get("schema") != "minilst-seed-table":
        bad.append(f"{script}: schema {f.attrs.get('schema')!r}")
    names = []
    f.visit(lambda n: names.append(n) if isinstance(f[n], h5py.Dataset) else None)
    for k in keys:
        v = np.asarray(f[k][()], dtype=float) if k in f else np.zeros(0)
        if not (v.size and np.any(np.isfinite(v) & (v > 0))):
            bad.append(f"{script}: {k} has no finite positive figure ({v.tolist() if v.size < 20 else v.shape})")
    for n in names:
        if n.endswith("measured_equals_model") and not np.all(np.asarray(f[n][()]).astype(bool)):
            bad.append(f"{script}: {n} is not all true: {np.asarray(f[n][()]).tolist()}")
    if script in ("alst_table1", "mst_table2", "mst_table11"):  # each technique lengthens the sequence
        s = np.asarray(f["cpu/longest_seq_len"][()], dtype=float)
        s = s[np.isfinite(s)]
        if not (s.size >= 2 and s[-1] > s[0]):
            bad.append(f"{script}: the last stack does not fit a longer sequence than the first: {s.tolist()}")
    print(f"{script}: {len(names)} datasets")
f = h5py.File(f"{sys.argv[1]}/memo_table7/memo_table7.h5", "r")
a = np.asarray(f["cpu/alpha"][()], dtype=float)
if not (a.size and np.all((a >= 0) & (a <= 1))):
    bad.append(f"memo_table7: alpha outside [0, 1]: {a.tolist()}")
# RSA's seed backward: the predicted ring bytes per layer equal the paper's 8(N-1)BZ(L/N)A (x 4 bytes).
f = h5py.File(f"{sys.argv[1]}/rsa_table2/rsa_table2.h5", "r")
if f.attrs["rsa_seed_backward"]:
    v = np.asarray([x.decode() for x in f["gpu/variant"][()]])
    ratio = np.asarray(f["gpu/comm"][()])[v == "rsa"] / np.asarray(f["gpu/comm_formula"][()])[v == "rsa"]
    if not np.allclose(ratio, 1.0, rtol=0, atol=1e-12):
        bad.append(f"rsa_table2: RSA ring bytes / the paper's formula = {ratio.tolist()}, expected 1")
    print(f"rsa_table2: RSA bytes per layer / 8(N-1)BZ(L/N)A = {ratio.tolist()}")
print("\n".join(bad) if bad else "seed tables smoke: ok")
sys.exit(1 if bad else 0)
PY
