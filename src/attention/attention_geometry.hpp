// What the attention strategies of a layout are on one rank, from token counts
// alone: the run builds its strategies from it (strategy_factory.hpp), `minilst
// plan` replays their buffers from it (attention_replay.hpp), and the strategy's
// name comes from it. Sequence-parallel rank s = r U + u (u: Ulysses member, r:
// ring member); strategy by degrees: U = R = 1 local; U > 1 Ulysses (over local
// attention, or over a ring when R > 1: the 2D hybrid); U = 1, R > 1 ring.
//   Ulysses member u of U: query heads [u H/U, (u+1) H/U); kv heads split when
//   G % U == 0 ([u G/U, (u+1) G/U)), replicated when U % G == 0 (head u / (U/G),
//   the one its query heads read).
//   Head-chunked (parallel.ulysses_head_chunks N): the member's heads in N chunks,
//   attended one at a time: chunk c has query heads [first + c H/(U N), +H/(U N)) and
//   either its share of the kv heads (kv_chunked: whole kv groups per chunk) or, where
//   the member holds one kv head, that one (every chunk reads it). What the strategy
//   keeps (q, k, v, o, statistics) is stored chunk by chunk: chunk c's [S_group, its
//   heads h] block after chunk c-1's (chunk_block), so each chunk is a plain matrix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/parallel_config.hpp"
#include "core/saved_layout.hpp"
#include "kernels/types.hpp"
#include "parallel/sequence_layout.hpp"

namespace minilst {

struct HeadRange {
  int first, count;  // heads [first, first + count)
};
inline HeadRange ulysses_q_heads(int member, int U, int H) { return {member * (H / U), H / U}; }
inline HeadRange ulysses_kv_heads(int member, int U, int G) {
  return G % U == 0 ? HeadRange{member * (G / U), G / U} : HeadRange{member / (U / G), 1};
}

struct AttentionGeometry {
  ParallelConfig parallel;                // U, R, ring layout and variant, overlap
  int heads = 1, kv_heads = 1, head_dim = 1;  // the model's H, G, h
  int me_ulysses = 0, me_ring = 0;        // this rank's member indices
  std::int64_t local_rows = 0;            // this rank's tokens
  std::vector<std::int64_t> member_rows;  // Ulysses: tokens of each member of this rank's group
  std::vector<std::int64_t> block_rows;   // ring: tokens of each ring member's Ulysses group
  int head_chunks = 1;                    // N (head_chunks(): 1 without Ulysses)
  int chunk_q = 0, chunk_kv = 0;          // > 0: one chunk's geometry (chunk()): its heads here

  int U() const { return parallel.ulysses; }
  int R() const { return parallel.ring; }
  // Tokens attention runs over on this rank: the group's after Ulysses' all-to-all.
  std::int64_t group_rows() const { return U() > 1 ? block_rows[me_ring] : local_rows; }
  // Heads attention runs over on this rank (after the all-to-all).
  int q_heads_here() const {
    return chunk_q > 0 ? chunk_q : U() > 1 ? ulysses_q_heads(me_ulysses, U(), heads).count : heads;
  }
  int kv_heads_here() const {
    return chunk_kv > 0 ? chunk_kv : U() > 1 ? ulysses_kv_heads(me_ulysses, U(), kv_heads).count : kv_heads;
  }
  // Head chunks: each chunk's query heads; whether the kv heads are split among the chunks
  // (else every chunk reads all of them: the member holds one); each chunk's kv heads.
  int chunk_q_heads() const { return q_heads_here() / head_chunks; }
  bool kv_chunked() const { return kv_heads_here() % head_chunks == 0; }
  int chunk_kv_heads() const { return kv_chunked() ? kv_heads_here() / head_chunks : kv_heads_here(); }
  // Chunk c's heads of member `member` ([first, first + count)): query heads, or kv heads.
  HeadRange chunk_heads(int member, bool kv, int c) const;
  // One chunk's geometry: what the inner strategy of a head-chunked Ulysses attends over
  // (q_heads_here, kv_heads_here, stats_shape: the chunk's). Itself when N = 1.
  AttentionGeometry chunk() const;
  // The statistics forward saves for the backward: the log-sum-exp rows [S_group, heads
  // here]; RSA with the seed's backward keeps the softmax probabilities instead,
  // [heads here x S_group, S] (S: every ring block's tokens; the seed's B Z L^2 / N).
  Extent2 stats_shape() const {
    if (!parallel.rsa_seed_backward()) return {group_rows(), q_heads_here()};
    std::int64_t keys = 0;
    for (const auto rows : block_rows) keys += rows;
    return {std::int64_t(q_heads_here()) * group_rows(), keys};
  }
  // Where the backward reads q, k, v, o: Ulysses keeps them head-sharded, [S_group,
  // heads here h] (its backward then fetches only dO); the others read the layer's own.
  SavedLayout saved_layout() const {
    const std::int64_t q = std::int64_t(q_heads_here()) * head_dim, kv = std::int64_t(kv_heads_here()) * head_dim;
    return {{group_rows(), q}, {group_rows(), kv}, U() == 1};
  }
  // "local", "ulysses", "ulysses(4 head chunks)", "ring(zigzag)", "ring-rsa(contiguous)", "hybrid ulysses x ring(zigzag)".
  std::string name() const;
};

// Chunk c of a matrix kept chunk by chunk (the attention geometry's note): the block of
// `shape` after c such blocks, a plain [rows, cols] view of the same memory.
template <class View>
View chunk_block(const View& whole, int c, Extent2 shape) {
  return View(whole.data() + std::size_t(c) * std::size_t(shape.rows * shape.cols), shape.rows, shape.cols);
}

AttentionGeometry attention_geometry(const ModelConfig& cfg, const ParallelConfig& par, const SequenceLayout& layout,
                                     int sp_rank);

}  // namespace minilst
