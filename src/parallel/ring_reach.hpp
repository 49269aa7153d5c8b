// Which ring members see which ring blocks, and how far each block must travel.
// Visibility, from ranges of consecutive positions: the queries [a, e] of a range see
// the union over p in [a, e] of [q_lo(p), p], which is [q_lo(a), e] (q_lo never
// decreases with p and never exceeds it); so a query range sees a key range [c, d]
// iff c <= e and d >= q_lo(a). The same answer as testing query by query.
// Reach: block b starts at member b and visits member (b + t) mod R at ring step t;
// reach[b] is the last step t at which its visitor sees it (0: only its home member,
// or nobody). The flash ring sends block b on at steps t < reach[b] only, and the
// backward's dK/dV accumulator of b, having visited every member up to step reach[b],
// goes from there straight home (ring_attention.hpp).
#pragma once

#include <vector>

#include "core/batch.hpp"
#include "parallel/sequence_layout.hpp"

namespace minilst {

// Whether some query of `queries` sees some key of `keys` under `mask`.
bool ranges_see(const PositionRanges& queries, const PositionRanges& keys, const SequenceMask& mask);

// Runs of consecutive positions of a token list, in its order.
PositionRanges position_ranges(const std::vector<std::int64_t>& positions);

// visible[m][b]: ring member m's queries see some key of member b's block ([R][R]).
std::vector<std::vector<bool>> ring_visibility(const std::vector<PositionRanges>& members, const SequenceMask& mask);

// reach[b] for every block ([R]), from the visibility.
std::vector<int> ring_reach(const std::vector<std::vector<bool>>& visible);

// The messages of a block's size a member sends at ring step t for the block it holds
// then (reach: that block's reach; R members): forward, the block on (RSA's passes: at
// every step but the last; the flash ring: while a later member sees it); backward, the
// flash ring's K/V block on and its dK/dV accumulator on or home (up to the block's last
// visitor), or RSA's seed passes as its forward. The communication model, the per-hop
// work and the time model count these; ring_attention.cpp sends them.
struct HopSends {
  int forward = 0, backward = 0;
};
inline HopSends hop_sends(int t, int reach, int R, bool rsa_forward, bool seed_backward) {
  const int every = t + 1 < R ? 1 : 0, on = t < reach ? 1 : 0, home = t <= reach && reach > 0 ? 1 : 0;
  return {rsa_forward ? every : on, seed_backward ? every : on + home};
}

// The ring members' ranges of a layout.
std::vector<PositionRanges> ring_member_ranges(const SequenceLayout& layout);
// reach of a layout's ring under `mask` (one layer's: SequenceMask::at_layer).
std::vector<int> ring_reach(const SequenceLayout& layout, const SequenceMask& mask);

}  // namespace minilst
