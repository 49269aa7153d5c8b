// The attention work one rank does in one layer and micro-step, counted as the kernels
// do it: only the (query tile, key block) pairs a kernel computes, each counted whole.
//
// Convention. The flash kernels (kernels/attention.hpp, attention_onednn.cpp) walk tiles
// of `rows` query rows (of each of the `group` heads sharing a kv head) by blocks of
// `keys` keys, and skip a pair when no query of the tile can see a key of the block by
// the positions' ranges: every key after the tile's last query position, or before its
// smallest first visible position q_lo. A pair not skipped is computed whole, its masked
// elements too, and is counted whole: rows x keys query-key pairs per query head. The
// reference kernel computes visible elements only (tiles of 1 x 1). The ring computes a
// visiting block only when some local query sees one of its keys (ring_attention.hpp),
// in up to 8 slices of query rows (tiles restart at each slice); RSA's forward computes
// every block whole, its seed backward the visible blocks whole.
//   FLOPs, per counted query-key pair and query head (model/flops.hpp): forward 4 h
//   (q.k, p.v), backward 10 h (the scores again, dV, dP, dQ, dK); RSA's seed backward
//   8 h (it keeps P: dV, dS, dQ, dK).
//   Bytes, the operands a computed pair streams, per kv head: forward the block's K and V
//   rows (2 keys h), backward the tile's Q and dO rows (2 group rows h), T bytes an
//   element (the kernels' loop orders: a tile's queries stay while key blocks stream;
//   the backward keeps a key block while query tiles stream). RSA: each block's K and V
//   rows once per computed block.
//   Per ring hop t (block of member me - t): its forward + backward FLOPs, and the bytes
//   this rank sends at that hop (the flash ring: the K/V block on while a later member
//   sees it, and the backward's dK/dV accumulator up to the block's last visitor,
//   parallel/ring_reach.hpp; RSA's passes: the block on at every hop but the last):
//   summed over hops, the communication model's ring bytes of a layer (model/comm_model.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "attention/attention_geometry.hpp"
#include "core/batch.hpp"
#include "core/config.hpp"
#include "kernels/kernel_choice.hpp"
#include "parallel/sequence_layout.hpp"

namespace minilst {

struct AttentionTiles {
  std::int64_t rows = 1, keys = 1;  // query rows (per head) of a tile, keys of a block
};
// The tiles of the attention kernel a run calls (attention_kernel_name), for `group`
// query heads per kv head: portable 64 stacked rows by 64 keys, oneDNN (bf16 on hosts)
// 256 by 256, the reference 1 by 1; tensor cores (CUDA) 64 rows per head by 64 keys, their
// forward's tiles (their dK/dV pass walks 64 keys by 32 queries: counted as the forward's).
AttentionTiles attention_tiles(const KernelChoice& kernels, Precision precision, int group);

// The pairs one kernel call computes: q_pos, q_lo [Sq] (q_lo empty: causal), k_pos [Sk].
struct TileCount {
  std::int64_t pairs = 0;      // query-key pairs of the computed tiles (per query head)
  std::int64_t key_rows = 0;   // sum over computed tiles of their keys
  std::int64_t query_rows = 0;  // sum over computed tiles of their query rows (per head)
};
TileCount computed_tiles(const std::vector<std::int64_t>& q_pos, const std::vector<std::int64_t>& q_lo,
                         const std::vector<std::int64_t>& k_pos, AttentionTiles tiles);

struct AttentionWork {  // one layer, one micro-step, this rank
  double flops_forward = 0, flops_backward = 0, bytes_forward = 0, bytes_backward = 0;
  // [R] per hop t (hop t's block; [1] without a ring): forward and backward FLOPs, bytes sent
  std::vector<double> hop_flops_forward, hop_flops_backward, hop_bytes_forward, hop_bytes_backward;
};
// g: this rank's geometry; layout and mask: the run's; T: bytes of an activation element.
AttentionWork attention_work(const AttentionGeometry& g, const SequenceLayout& layout, const SequenceMask& mask,
                             AttentionTiles tiles, std::uint64_t T);

// One training step's attention on this rank: every layer's work (its mask's: the
// window's layers and the others, SequenceMask::at_layer) times grad_accum, the forward
// counted twice where the memory policy recomputes attention (its sends too). Totals,
// and per hop forward + backward (docs/metrics.md's /attention/*).
struct StepAttentionWork {
  double flops_forward = 0, flops_backward = 0, bytes_forward = 0, bytes_backward = 0;
  std::vector<double> hop_flops, hop_bytes;  // [R]
  double flops() const { return flops_forward + flops_backward; }
};
StepAttentionWork step_attention_work(const ModelConfig& cfg, const AttentionGeometry& g, const SequenceLayout& layout,
                                      const SequenceMask& mask, AttentionTiles tiles, std::uint64_t T, int grad_accum,
                                      bool recompute_attention);

}  // namespace minilst
