// How many query-key pairs a mask lets a rank's queries see: the attention's useful work,
// counted in closed form from ranges of consecutive positions, so the time model can price
// packed documents and windows at any S without a position list.
//   pairs(Q, K) = sum over queries p in Q of |[max(q_lo(p), first key), min(p, last key)]|
// Within one document piece of Q both ends are linear in p (q_lo(p) is the document's start,
// or p - w + 1 past the window's reach), so each piece sums an arithmetic series.
#pragma once

#include "core/batch.hpp"
#include "parallel/sequence_layout.hpp"

namespace minilst {

// Pairs (query p, key j) with q_lo(p) <= j <= p, p in `queries`, j in `keys`.
double visible_pairs(const PositionRange& queries, const PositionRange& keys, const SequenceMask& mask);
double visible_pairs(const PositionRanges& queries, const PositionRanges& keys, const SequenceMask& mask);

}  // namespace minilst
