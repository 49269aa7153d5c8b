// Token ranges and mini-sequence counts.
//   chunk_range(n, m, c)  chunk c of n tokens cut into m chunks whose sizes differ by
//                         at most one; m larger than n gives n one-token chunks
//   chunks_for_budget     `auto`: the smallest M whose chunk intermediates fit a byte
//                         budget, M = ceil(S / max(1, floor(budget / bytes_per_token)))
// The papers' fixed choices, for comparison: ALST's MLP uses ceil(S/d) chunks, MsT
// uses M = 4 (MLP) and 16 (LM head) for Llama 3; a budget adapts to S, d, I, V and
// the scalar type.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace minilst {

// Tokens [begin, end).
struct Range {
  std::int64_t begin, end;
  std::int64_t size() const { return end - begin; }
};

inline int effective_chunks(std::int64_t n, int m) { return int(n < m ? (n > 0 ? n : 1) : m); }

inline Range chunk_range(std::int64_t n, int m, int c) {
  m = effective_chunks(n, m);
  return {n * c / m, n * (c + 1) / m};
}

inline int chunks_for_budget(std::int64_t tokens, double bytes_per_token, double budget_bytes) {
  const double per_chunk = std::max(1.0, std::floor(budget_bytes / bytes_per_token));
  // at most one token per chunk, and at most 2^30 chunks (an int; the plan refuses far fewer)
  return int(std::min({double(tokens), std::ceil(double(tokens) / per_chunk), double(1 << 30)}));
}

}  // namespace minilst
