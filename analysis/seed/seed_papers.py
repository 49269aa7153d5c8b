#!/usr/bin/env python3
"""The seed papers' printed numbers, cell by cell, as the seed-table analyses compare them.

Every table is a PaperTable: the paper, its table number as printed ("Table 13"), the unit, the
column heads and, per row, the cells exactly as printed ("0.2" stays "0.2", "52.34%" keeps its %,
MEMO's out-of-memory marks stay "×oom" / "×oohm"). A cell that the extracted text of the paper does
not show is None, with the reason in `unreadable`. Row labels are the project's short names; the
paper's own row heads are kept in `printed_rows` where the text has them.

Table numbers are those of the long arXiv versions: MsT arXiv 2407.15892 (Tables 1-15), MEMO arXiv
2407.12117, ALST arXiv 2506.13996, RSA arXiv 2105.13120.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

# MsT Tables 12-15: the sequence lengths of the columns, as printed.
MST_BLOCK_S = ["1024", "2048", "4096", "8192", "20000", "40000", "80000"]
# MEMO Tables 3-7: the sequence-length columns, as printed.
MEMO_S = ["64K", "128K", "256K", "384K", "512K", "640K", "768K", "896K", "1024K", "1152K", "1280K", "1408K"]
OOM, OOHM = "×oom", "×oohm"  # MEMO's marks: out of GPU memory, out of host memory


@dataclass
class PaperTable:
    paper: str                 # seed_common.PAPERS key: mst, alst, memo, rsa
    table: str                 # the table's number as printed, e.g. "Table 13"
    what: str                  # what the table holds (the project's words)
    unit: str                  # unit of the cells, as the paper gives it
    columns: list              # column heads, as printed
    rows: dict                 # row key -> cells as printed (None: not in the extracted text)
    printed_rows: dict = field(default_factory=dict)  # row key -> the paper's row head
    unreadable: str = ""       # why some cells are None

    @property
    def name(self) -> str:
        return f"{ {'mst': 'MsT', 'alst': 'ALST', 'memo': 'MEMO', 'rsa': 'RSA', 'upipe': 'UPipe'}[self.paper]} {self.table}"

    def cell(self, row: str, column: str) -> str | None:
        return self.rows[row][self.columns.index(column)]

    def value(self, row: str, column: str) -> float:
        """A cell as a number (NaN for OOM marks and unreadable cells); see parse()."""
        return parse(self.cell(row, column))

    def cells(self):
        """(row, column, printed) for every cell the text prints."""
        for r, cs in self.rows.items():
            for c, v in zip(self.columns, cs):
                if v is not None:
                    yield r, c, v

    def count(self) -> int:
        return sum(1 for _ in self.cells())

    def missing(self) -> int:
        return sum(v is None for cs in self.rows.values() for v in cs)

    def md(self) -> str:
        head = ["row"] + list(self.columns)
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r, cs in self.rows.items():
            label = self.printed_rows.get(r, r)
            lines.append("| " + " | ".join([label] + ["unreadable" if v is None else v for v in cs]) + " |")
        return "\n".join(lines)


def parse(printed: str | None) -> float:
    """A printed cell as a number: '59.92' -> 59.92, '52.34%' -> 0.5234, '32K' -> 32e3, '1.1M' -> 1.1e6,
    '0:02:03' -> 123 (seconds); OOM marks and None -> NaN. Sequence lengths in K and M count 10^3 and
    10^6, as ALST writes them (MEMO's 1024K is 1024 x 1024 tokens: use memo_tokens)."""
    if printed is None or printed in (OOM, OOHM, "OOM"):
        return math.nan
    if printed.endswith("%"):
        return float(printed[:-1]) / 100
    if re.fullmatch(r"\d+:\d\d:\d\d", printed):
        h, m, s = (int(x) for x in printed.split(":"))
        return 3600 * h + 60 * m + s
    if printed[-1] in "KM":
        return float(printed[:-1]) * {"K": 1e3, "M": 1e6}[printed[-1]]
    return float(printed)


def memo_tokens(column: str) -> int:
    """MEMO's sequence lengths are powers of two: 64K = 65,536 tokens, 1024K = 1,048,576."""
    return int(column[:-1]) * 1024


# ---------------------------------------------------------------- MsT (arXiv 2407.15892)

MST_TABLE2 = PaperTable(
    "mst", "Table 2", "longest sequence of Llama-3-8B on one A100 80G", "K tokens",
    ["Maximum Sequence Length (K)"],
    {"vanilla": ["5"], "recomputation": ["14"], "mst": ["60"]},
    {"vanilla": "Llama3-8B-hf vanilla", "recomputation": "Llama3-8B-hf activation recomputation",
     "mst": "Llama3-8B-hf MsT"})

MST_TABLE3 = PaperTable(
    "mst", "Table 3", "longest sequence of Llama-2 7B and 13B on one A100 80G", "K tokens",
    ["Maximum Sequence Length (K)"],
    {"llama2_7b/vanilla": ["7"], "llama2_7b/recomputation": ["45"], "llama2_7b/mst": ["84"],
     "llama2_13b/vanilla": ["2"], "llama2_13b/recomputation": ["25"], "llama2_13b/mst": ["40"]},
    {"llama2_7b/vanilla": "Llama2-7B-hf Huggingface 4.40.1", "llama2_7b/recomputation": "Llama2-7B-hf Huggingface PEFT",
     "llama2_7b/mst": "Llama2-7B-hf MsT", "llama2_13b/vanilla": "Llama2-13B-hf Huggingface 4.40.1",
     "llama2_13b/recomputation": "Llama2-13B-hf Huggingface PEFT", "llama2_13b/mst": "Llama2-13B-hf MsT"})

MST_TABLE4 = PaperTable(
    "mst", "Table 4", "longest sequence on one A100 80G with gradient accumulation", "K tokens",
    ["Maximum Sequence Length (K)"],
    {"llama3_8b/recomputation": ["8"], "llama3_8b/mst": ["30"],
     "llama2_7b/recomputation": ["38"], "llama2_7b/mst": ["52"]},
    {"llama3_8b/recomputation": "Llama3-8B-hf activation recomputation", "llama3_8b/mst": "Llama3-8B-hf MsT",
     "llama2_7b/recomputation": "Llama2-7B-hf activation recomputation", "llama2_7b/mst": "Llama2-7B-hf MsT"})

# The long version's extracted text keeps Table 5's numbers but not its first column; the rows'
# implementations are those of the workshop version's Table 4, which prints the same numbers.
MST_TABLE5 = PaperTable(
    "mst", "Table 5", "time per step and TFLOPS on one A100 80G", "s per step; TFLOPS",
    ["Batch Size", "Training Time Per Step (s)", "TFLOPS"],
    {"llama3_8b/vanilla/b1": ["1", "OOM", "OOM"],
     "llama3_8b/recomputation/b2": ["2", "5.01", "3271.42"],
     "llama3_8b/mst/b2": ["2", "5.80", "2825.12"],
     "llama3_8b/mst/b8": ["8", "19.64", "3336.14"],
     "llama2_7b/vanilla/b1": ["1", "1.24", "3290.88"],
     "llama2_7b/recomputation/b8": ["8", "8.85", "3703.48"],
     "llama2_7b/mst/b8": ["8", "9.49", "3452.19"],
     "llama2_7b/mst/b16": ["16", "18.00", "3639.93"]},
    {"llama3_8b/vanilla/b1": "Llama3-8B-hf vanilla",
     "llama3_8b/recomputation/b2": "Llama3-8B-hf activation recomputation",
     "llama3_8b/mst/b2": "Llama3-8B-hf MsT", "llama3_8b/mst/b8": "Llama3-8B-hf MsT",
     "llama2_7b/vanilla/b1": "Llama2-7B-hf vanilla",
     "llama2_7b/recomputation/b8": "Llama2-7B-hf activation recomputation",
     "llama2_7b/mst/b8": "Llama2-7B-hf MsT", "llama2_7b/mst/b16": "Llama2-7B-hf MsT"})

# The extracted caption names Llama3-8B and one A100, and the head shows a stray "1" before the GPU
# counts; the rows are Llama-2-7B with DeepSpeed-Ulysses on 2, 4 and 8 GPUs (Appendix E's text).
MST_TABLE11 = PaperTable(
    "mst", "Table 11", "longest sequence of Llama-2-7B with DeepSpeed-Ulysses on 2, 4, 8 GPUs", "K tokens",
    ["2", "4", "8"],
    {"recomputation": ["24", "48", "96"], "mst": ["32", "64", "128"]},
    {"recomputation": "Llama2-7B-hf activation recomputation", "mst": "Llama2-7B-hf MsT"})

MST_TABLE12 = PaperTable(
    "mst", "Table 12", "LM head + loss time against the mini-sequence count M, Llama-3-8B", "s", MST_BLOCK_S,
    {"standard": ["0.01", "0.02", "0.04", "0.09", "0.2", "0.4", "0.85"],
     "M=2": ["0.02", "0.04", "0.07", "0.14", "0.31", "0.67", "1.36"],
     "M=4": ["0.03", "0.04", "0.07", "0.14", "0.33", "0.67", "1.33"],
     "M=8": ["0.04", "0.05", "0.08", "0.14", "0.34", "0.67", "1.34"],
     "M=16": ["0.06", "0.07", "0.09", "0.16", "0.34", "0.68", "1.35"],
     "M=32": ["0.11", "0.11", "0.14", "0.19", "0.37", "0.69", "1.36"]})

MST_TABLE13 = PaperTable(
    "mst", "Table 13", "LM head + loss memory against the mini-sequence count M, Llama-3-8B", "GB", MST_BLOCK_S,
    {"standard": ["3.20", "3.46", "4.94", "7.91", "16.46", "30.95", "59.92"],
     "mini-seq=2": ["2.59", "3.21", "4.46", "6.95", "14.14", "26.31", "50.66"],
     "mini-seq=4": ["2.28", "2.60", "3.24", "4.52", "8.20", "14.44", "26.92"],
     "mini-seq=8": ["2.13", "2.30", "2.63", "3.30", "5.24", "8.51", "15.05"],
     "mini-seq=16": ["2.06", "2.15", "2.33", "2.70", "4.14", "5.54", "9.12"],
     "mini-seq=32": ["2.02", "2.07", "2.18", "2.39", "3.01", "4.06", "6.15"]})

MST_TABLE14 = PaperTable(
    "mst", "Table 14", "MLP time against the mini-sequence count M, Llama-3-8B", "s", MST_BLOCK_S,
    {"standard": ["0.05", "0.08", "0.16", "0.31", "0.74", "1.52", "2.96"],
     "M=2": ["0.05", "0.10", "0.17", "0.32", "0.76", "1.49", "3.05"],
     "M=4": ["0.07", "0.11", "0.19", "0.33", "0.79", "1.52", "2.99"],
     "M=8": ["0.12", "0.15", "0.22", "0.38", "0.81", "1.58", "3.05"]})

MST_TABLE15 = PaperTable(
    "mst", "Table 15", "MLP memory against the mini-sequence count M, Llama-3-8B", "GB", MST_BLOCK_S,
    {"standard": ["0.93", "1.09", "1.39", "2.11", "4.18", "7.69", "14.72"],
     "M=2": ["1.29", "1.36", "1.50", "2.00", "3.76", "6.73", "12.69"],
     "M=4": ["1.32", "1.41", "1.61", "2.00", "3.49", "6.21", "11.66"],
     "M=8": ["1.33", "1.44", "1.66", "2.11", "3.42", "6.17", "11.66"]})


def mst_block_m(row: str) -> int:
    """The mini-sequence count of a row of MsT Tables 12-15 ('standard' is M = 1)."""
    return 1 if row == "standard" else int(row.split("=")[1])


# ---------------------------------------------------------------- ALST (arXiv 2506.13996)

_ALST_COLS = ["Sequence length (bs=1)", "Iteration time h:mm:ss", "TFLOPS"]
ALST_TABLE1 = PaperTable(
    "alst", "Table 1", "feature ablations, Llama-8B on one 8x H100 node", "tokens; h:mm:ss; TFLOPS", _ALST_COLS,
    {"base": ["32K", "0:00:17", "231.6"],
     "loss": ["160K", "0:02:03", "514.4"],
     "ulysses": ["1.1M", "0:09:24", "576.1"],
     "mlp": ["1.2M", "0:11:43", "548.7"],
     "offload": ["2.4M", "0:43:30", "585.8"],
     "all": ["3.7M", "1:47:35", "590.6"]},
    {"base": "baseline", "loss": "+ tiled logits & loss", "ulysses": "+ Ulysses SP for HF",
     "mlp": "+ tiled MLP", "offload": "+ activation checkpoint offload to CPU (no tiled MLP)",
     "all": "all five"})

# Section 5.5's three tables (baseline against ALST on 1, 8 and 32 H100s). The extracted text prints
# them without captions, so they are named by section and GPU count here.
ALST_SECTION55 = PaperTable(
    "alst", "Section 5.5", "baseline vs ALST, Llama-8B on 1 GPU, 1 node (8), 4 nodes (32)",
    "tokens; h:mm:ss; TFLOPS", _ALST_COLS,
    {"gpu1/base": ["32K", "0:00:26", "189.4"], "gpu1/all": ["500K", "0:16:50", "548.1"],
     "gpu8/base": ["32K", "0:00:17", "231.6"], "gpu8/all": ["3.7M", "1:47:35", "590.6"],
     "gpu32/base": ["32K", "0:00:12", "393.6"], "gpu32/all": ["15M", "7:25:09", "590.6"]},
    {"gpu1/base": "baseline (1 GPU)", "gpu1/all": "ALST (1 GPU)", "gpu8/base": "baseline (8 GPUs)",
     "gpu8/all": "ALST (8 GPUs)", "gpu32/base": "baseline (32 GPUs)", "gpu32/all": "ALST (32 GPUs)"},
    unreadable="the three tables have no caption in the extracted text")

# ALST Section 5.3: host memory per node ("1.9TB" for Llama-70B, "1.9TiB" for Qwen3-32B in the same
# section); one node has 8 H100s.
ALST_HOST_PER_NODE_TB = 1.9
ALST_GPUS_PER_NODE = 8

# ---------------------------------------------------------------- UPipe (arXiv 2602.21196)
# Not a seed paper: the longest published Llama-3-8B runs on H100 80GB since ALST, reached by
# Ulysses over chunks of heads (miniLST's parallel.ulysses_head_chunks), as they are reported.
UPIPE_RECORDS = PaperTable(
    "upipe", "records", "longest Llama-3-8B sequence trained on H100 80GB", "tokens", ["Sequence length (bs=1)"],
    {"gpu8": ["5M"], "gpu16": ["8M"]},
    {"gpu8": "UPipe, 8 GPUs", "gpu16": "UPipe, 16 GPUs"})

# ---------------------------------------------------------------- MEMO (arXiv 2407.12117)

MEMO_TABLE2 = PaperTable(
    "memo", "Table 2", "configurations of the evaluated GPT models", "",
    ["n_layers", "h", "h_ffn", "n_head", "n_vocab"],
    {"7B": ["32", "4096", "16384", "32", "50257"], "13B": ["40", "5120", "20480", "40", "50257"],
     "30B": ["48", "7168", "28672", "56", "50257"], "65B": ["80", "8192", "32768", "64", "50257"]})

MEMO_TABLE4 = PaperTable(
    "memo", "Table 4", "MFU of the ablations, 7B on 8 GPUs (TP 4, CP 2)", "MFU", MEMO_S[:8],
    {"recompute_noplan": ["41.19%", "23.00%", "29.07%", "25.67%", OOM, OOM, OOM, OOM],
     "recompute": ["42.91%", "43.17%", "42.05%", "42.49%", "41.90%", "42.15%", OOM, OOM],
     "swap": ["37.40%", "46.33%", "53.62%", OOHM, OOHM, OOHM, OOHM, OOHM],
     "memo": ["47.99%", "50.96%", "53.62%", "53.04%", "51.84%", "52.59%", "51.89%", "52.71%"]},
    {"recompute_noplan": "Full Recomputation", "recompute": "Full Recomputation + Memory Plan",
     "swap": "Full Swapping + Memory Plan",
     "memo": "MEMO (Fine-grained Recomputation & Swapping + Memory Plan)"})

# The extracted text misreads the 65B model's alpha row head as "AR"; its cells are readable.
_o = [OOM] * 3
MEMO_TABLE7 = PaperTable(
    "memo", "Table 7", "MEMO's parallelism strategy and offload fraction alpha per workload", "sizes; alpha",
    MEMO_S,
    {"8/7B/TP": ["2", "4", "4", "4", "4", "4", "4", "4", "8"] + _o,
     "8/7B/CP": ["2", "2", "2", "2", "2", "2", "2", "2", "1"] + _o,
     "8/7B/DP": ["2", "1", "1", "1", "1", "1", "1", "1", "1"] + _o,
     "8/7B/PP": ["1"] * 9 + _o,
     "8/7B/alpha": ["0.0", "0.0", "1.0", "0.5", "0.125", "0.125", "0.0", "0.0", "0.0"] + _o,
     "16/13B/TP": ["2", "4", "4", "4", "4", "4", "4", "4", "4", "4", "4", "4"],
     "16/13B/CP": ["2", "2", "2", "2", "4", "4", "4", "4", "4", "4", "4", "4"],
     "16/13B/DP": ["4", "2", "2", "1", "1", "1", "1", "1", "1", "1", "1", "1"],
     "16/13B/PP": ["1", "1", "1", "2", "1", "1", "1", "1", "1", "1", "1", "1"],
     "16/13B/alpha": ["0.0", "0.0", "0.0", "0.0", "0.5", "0.125", "0.125", "0.0", "0.0", "0.0", "0.0", "0.0"],
     "32/30B/TP": ["4", "8", "8", "8", "8", "8", "8", "8", "8", "8", "8", OOHM],
     "32/30B/CP": ["1", "1", "2", "2", "2", "4", "4", "4", "4", "4", "4", OOHM],
     "32/30B/DP": ["8", "4", "2", "2", "2", "1", "1", "1", "1", "1", "1", OOHM],
     "32/30B/PP": ["1"] * 11 + [OOHM],
     "32/30B/alpha": ["0.0", "0.0", "0.0", "0.0", "0.0", "0.25", "0.125", "0.125", "0.125", "0.125", "0.0", OOHM],
     "64/65B/TP": ["8", "4", "8", "8", "8", "8", "8", "8", "8", "8", "8", "8"],
     "64/65B/CP": ["1", "4", "4", "8", "8", "8", "8", "8", "8", "8", "8", "8"],
     "64/65B/DP": ["8", "4", "2", "1", "1", "1", "1", "1", "1", "1", "1", "1"],
     "64/65B/PP": ["1"] * 12,
     "64/65B/alpha": ["0.0", "0.0", "0.0", "0.25", "0.25", "0.25", "0.25", "0.125", "0.125", "0.0", "0.0", "0.0"]})

# MEMO Section 5.1: each node has 8 A800 GPUs (80GB), "2TB" of CPU memory and a GPU-CPU link of
# "32GB/s"; MFU is against the A800's 312 TFLOPS. Section 3: a 7B model on 8 GPUs with TP 8 overlaps
# a layer's whole swap with its compute only beyond 192K tokens.
MEMO_HOST_PER_NODE_TB = 2
MEMO_GPUS_PER_NODE = 8
MEMO_LINK_GBS = 32
MEMO_PEAK_TFLOPS = 312
MEMO_OVERLAP_FROM = "192K"  # with TP 8 on 8 GPUs, the 7B model
MEMO_ALPHA_GRID = (0.0, 0.125, 0.25, 0.5, 1.0)  # the only fractions Table 7 uses

# ---------------------------------------------------------------- RSA (arXiv 2105.13120)

# Table 1's memory cells are garbled in the extracted text; Eq. (5) prints the same two expressions,
# which are recorded here. Table 2's memory cells are readable.
RSA_TABLE1 = PaperTable(
    "rsa", "Table 1", "MLP block memory per device", "elements", ["Memory"],
    {"tensor parallelism": ["32H^2/N + 4BLH/N + BLH"], "sequence parallelism": ["32H^2 + 5BLH/N"]},
    unreadable="the table's memory cells are garbled in the extracted text; both expressions are Eq. (5)'s")
RSA_TABLE2 = PaperTable(
    "rsa", "Table 2", "multi-head attention block memory per device", "elements", ["Memory"],
    {"tensor parallelism": ["16AZH/N + 4BLZA/N + BZL^2/N + BLH"],
     "sequence parallelism": ["16AZH + 4BZLA/N + BZL^2/N + BLH/N"]})
# Section 3.2.2's communication per layer, in elements, as printed.
RSA_SECTION322 = PaperTable(
    "rsa", "Section 3.2.2", "communication per layer", "elements", ["forward", "backward", "combined"],
    {"sequence parallelism": ["2(N-1) * B * Z * (L/N) * A", "6(N-1) * B * Z * (L/N) * A", "8(N-1) * B * Z * (L/N) * A"],
     "tensor parallelism": ["2(N-1) * B*Z*(L/N)*A", "2(N-1) * B*Z*(L/N)*A", "8(N-1)*B*Z*(L/N)*A"]})

ALL = [MST_TABLE2, MST_TABLE3, MST_TABLE4, MST_TABLE5, MST_TABLE11, MST_TABLE12, MST_TABLE13, MST_TABLE14,
       MST_TABLE15, ALST_TABLE1, ALST_SECTION55, MEMO_TABLE2, MEMO_TABLE4, MEMO_TABLE7, RSA_TABLE1, RSA_TABLE2,
       RSA_SECTION322]


def memo_shape(model: str, tp: int = 1) -> dict:
    """MEMO's GPT of Table 2 as miniLST deck keys: multi-head attention (kv heads = heads) and a SwiGLU
    MLP of width 8h/3 rounded up to a multiple of 256 (the GeLU MLP's 8h^2 parameters; Llama-2's 11008
    and 13824 at h = 4096 and 5120). Under tensor parallelism tp the vocabulary is padded as Megatron-LM
    (MEMO's base) pads it: to a multiple of 128 tp (50257 -> 50432 at TP 2, 50688 at 4, 51200 at 8)."""
    layers, h, _, heads, vocab = (int(parse(c)) for c in MEMO_TABLE2.rows[model])
    if tp > 1:
        vocab = -(-vocab // (128 * tp)) * 128 * tp
    return {"model.layers": layers, "model.hidden": h, "model.heads": heads, "model.kv_heads": heads,
            "model.intermediate": -(-8 * h // (3 * 256)) * 256, "model.vocab": vocab}


def memo_configs(gpus_model: str):
    """MEMO Table 7's workloads of one row group ('8/7B'): (column, tokens, TP, CP, DP, PP, alpha as
    printed), the columns where the table gives a strategy."""
    get = lambda k: MEMO_TABLE7.rows[f"{gpus_model}/{k}"]
    for i, col in enumerate(MEMO_S):
        tp, cp, dp, pp, a = (get(k)[i] for k in ("TP", "CP", "DP", "PP", "alpha"))
        if tp not in (OOM, OOHM):
            yield col, memo_tokens(col), int(tp), int(cp), int(dp), int(pp), a


if __name__ == "__main__":  # for the bash scripts: the same numbers, one source
    import sys

    if sys.argv[1:2] == ["memo-sets"]:  # memo-sets 7B [TP]: the shape as --set arguments
        tp = int(sys.argv[3]) if len(sys.argv) > 3 else 1
        print(" ".join(f"--set {k}={v}" for k, v in memo_shape(sys.argv[2], tp).items()))
    elif sys.argv[1:2] == ["memo-configs"]:  # memo-configs 8/7B: "column tokens TP CP DP PP" per workload
        for c in memo_configs(sys.argv[2]):
            print(*c[:6])
    else:
        sys.exit("usage: seed_papers.py memo-sets MODEL [TP] | memo-configs GPUS/MODEL")
