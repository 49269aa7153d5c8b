// Which global token positions each rank of a sequence-parallel group holds.
// The group has P = U x R ranks: Ulysses groups of U consecutive ranks, and a
// ring across the R groups (sp rank s = r U + u). Ring member r owns a part of
// the sequence, split among its Ulysses group:
//   contiguous  the sequence cut in R pieces; member r owns piece r
//   zigzag      the sequence cut in 2R chunks; member r owns chunks r and 2R-1-r
//               (causal load balance: every ring member gets early and late tokens)
//   balanced    the sequence cut in R k chunks (k per member: S / (256 R), at least 2,
//               at most 16 and at most S / R); each chunk priced by its attention cost
//               under the mask, the keys its queries see: the sum over its positions p
//               of p - q_lo(p) + 1 (causal: p + 1; packed documents: the position
//               within the document + 1; a window w: at most w; a window in some layers
//               only: the mean of both masks'); the chunks dealt costliest first to the
//               member with the least cost so far that still has room (longest
//               processing time first). Room: member r takes exactly as many tokens as
//               under contiguous (chunk sizes differ by one token; each member's quota
//               of the larger ones makes its count the contiguous count), so the token
//               counts, and every model of memory and communication built on them, do
//               not depend on the mask. A document longer than a member's share spans
//               several chunks, dealt to different members like zigzag's chunks; short
//               documents are dealt whole or cut at chunk edges. A member's chunks stay
//               in position order.
// and each member's token list is cut contiguously U ways. Cuts are balanced
// (sizes differ by at most one token), so S needs no divisibility: the kernels
// take explicit positions and every layout is exact. The attention mask follows the
// positions too: the first visible position q_lo of each token (core/batch.hpp's
// SequenceMask: documents, a sliding window), in the same order as its positions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/batch.hpp"
#include "core/parallel_config.hpp"

namespace minilst {

struct PositionRange {  // the consecutive positions [begin, end)
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
};
using PositionRanges = std::vector<PositionRange>;  // in position order, none empty

// The balanced layout's ring members' tokens (in position order), R lists of ranges.
std::vector<PositionRanges> balanced_ring_ranges(std::int64_t seq_len, int ring, const SequenceMask& mask);
// The same as positions.
std::vector<std::vector<std::int64_t>> balanced_ring_positions(std::int64_t seq_len, int ring, const SequenceMask& mask);

class SequenceLayout {
 public:
  // with_positions false: token counts and ranges only (memory and communication models at
  // any S). mask: the sequence's (the balanced layout's costs; the others ignore it).
  SequenceLayout(std::int64_t seq_len, int ulysses, int ring, RingLayout layout, bool with_positions = true,
                 const SequenceMask& mask = SequenceMask{});

  int ulysses() const { return U_; }
  int ring() const { return R_; }
  int size() const { return U_ * R_; }
  // Global positions held by sp rank s = r*U + u, in local order.
  const std::vector<std::int64_t>& positions(int sp_rank) const { return positions_.at(sp_rank); }
  // The tokens of ring member r's Ulysses group, in member order (what a rank
  // of that group holds after the Ulysses all-to-all).
  std::vector<std::int64_t> group_positions(int ring_rank) const;
  // The same tokens as ranges of consecutive positions (also without positions).
  const PositionRanges& group_ranges(int ring_rank) const { return ranges_.at(ring_rank); }
  // The first visible positions of those tokens, in the same order; empty when the mask
  // is causal (every q_lo 0: the kernels need none).
  std::vector<std::int64_t> q_lo(int sp_rank, const SequenceMask& mask) const {
    return mask.causal_only() ? std::vector<std::int64_t>{} : mask.q_lo(positions(sp_rank));
  }
  std::vector<std::int64_t> group_q_lo(int ring_rank, const SequenceMask& mask) const {
    return mask.causal_only() ? std::vector<std::int64_t>{} : mask.q_lo(group_positions(ring_rank));
  }
  // Token counts: of sp rank s, and of ring member r's Ulysses group.
  std::int64_t tokens(int sp_rank) const { return counts_.at(sp_rank); }
  std::int64_t group_tokens(int ring_rank) const;

 private:
  int U_, R_;
  std::vector<std::vector<std::int64_t>> positions_;  // [P][S_local] (empty without positions)
  std::vector<std::int64_t> counts_;                  // [P]
  std::vector<PositionRanges> ranges_;                // [R] each ring member's tokens
};

}  // namespace minilst
