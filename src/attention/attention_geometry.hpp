// What the attention strategies of a layout are on one rank, from token counts
// alone: the run builds its strategies from it (strategy_factory.hpp), `minilst
// plan` replays their buffers from it (attention_replay.hpp), and the strategy's
// name comes from it. Sequence-parallel rank s = r U + u (u: Ulysses member, r:
// ring member); strategy by degrees: U = R = 1 local; U > 1 Ulysses (over local
// attention, or over a ring when R > 1: the 2D hybrid); U = 1, R > 1 ring.
//   Ulysses member u of U: query heads [u H/U, (u+1) H/U); kv heads split when
//   G % U == 0 ([u G/U, (u+1) G/U)), replicated when U % G == 0 (head u / (U/G),
//   the one its query heads read).
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

  int U() const { return parallel.ulysses; }
  int R() const { return parallel.ring; }
  // Tokens attention runs over on this rank: the group's after Ulysses' all-to-all.
  std::int64_t group_rows() const { return U() > 1 ? block_rows[me_ring] : local_rows; }
  // Heads attention runs over on this rank (after the all-to-all).
  int q_heads_here() const { return U() > 1 ? ulysses_q_heads(me_ulysses, U(), heads).count : heads; }
  int kv_heads_here() const { return U() > 1 ? ulysses_kv_heads(me_ulysses, U(), kv_heads).count : kv_heads; }
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
  // "local", "ulysses", "ring(zigzag)", "ring-rsa(contiguous)", "hybrid ulysses x ring(zigzag)".
  std::string name() const;
};

AttentionGeometry attention_geometry(const ModelConfig& cfg, const ParallelConfig& par, const SequenceLayout& layout,
                                     int sp_rank);

}  // namespace minilst
