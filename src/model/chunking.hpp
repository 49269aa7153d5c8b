// Mini-sequence counts: how many chunks M a block's S tokens are cut into.
// `auto` picks the smallest M whose chunk intermediates fit a byte budget:
//   M = ceil(S / max(1, floor(budget / bytes_per_token)))
// (at least one token per chunk, so a budget smaller than one token's
// intermediates gives one-token chunks). The papers' fixed choices, for
// comparison: ALST's MLP uses ceil(S/d) chunks, MsT uses M = 4 (MLP) and 16
// (LM head) for Llama 3; a budget adapts to S, d, I, V and the scalar type.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace minilst {

inline int chunks_for_budget(std::int64_t tokens, double bytes_per_token, double budget_bytes) {
  const double per_chunk = std::max(1.0, std::floor(budget_bytes / bytes_per_token));
  // at most one token per chunk, and at most 2^30 chunks (an int; plan_deck refuses far fewer)
  return int(std::min({double(tokens), std::ceil(double(tokens) / per_chunk), double(1 << 30)}));
}

}  // namespace minilst
