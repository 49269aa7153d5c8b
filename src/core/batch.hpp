// One micro-step's sequence: tokens and their labels, in global order (or a
// rank's shard of them, in local order); and which keys each token's attention
// may see (SequenceMask).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace minilst {

struct Batch {
  std::vector<std::int64_t> tokens;  // [S]
  std::vector<std::int64_t> labels;  // [S], label[i] = token[i+1] of the global sequence
  std::int64_t n_valid = 0;          // labels != kIgnoreLabel (kernels/types.hpp) in the *global* sequence
};

// The attention mask of a sequence, over global positions p = 0..S-1: packed documents
// and a sliding window. Documents start at 0 and at every position of doc_starts
// (strictly increasing, >= 0; a listed 0 is the first document's start); the window w
// (0: none) limits a query to its w latest keys.
//   doc_start(p)  the start of p's document
//   q_lo(p)       the first position query p may see: max(doc_start(p), p - w + 1) (w > 0),
//                 doc_start(p) (w = 0); key j is visible to query i iff q_lo(i) <= j <= i
//   rope(p)       p - doc_start(p): the rotary position restarts with each document
// The default (one document, no window) is plain causal attention: q_lo = 0, rope(p) = p.
struct SequenceMask {
  std::vector<std::int64_t> doc_starts;  // the documents' first positions (0 implied)
  std::int64_t window = 0;               // keys a query sees at most, itself included (0: no window)

  // More than one document: rotary positions differ from the global ones.
  bool has_documents() const { return !doc_starts.empty() && doc_starts.back() > 0; }
  // Plain causal attention: every query sees from position 0 (q_lo = 0 everywhere).
  bool causal_only() const { return !has_documents() && window == 0; }
  std::int64_t doc_start(std::int64_t p) const {
    const auto it = std::upper_bound(doc_starts.begin(), doc_starts.end(), p);
    return it == doc_starts.begin() ? 0 : *(it - 1);
  }
  std::int64_t q_lo(std::int64_t p) const {
    const std::int64_t d = doc_start(p);
    return window > 0 ? std::max(d, p - window + 1) : d;
  }
  std::int64_t rope_position(std::int64_t p) const { return p - doc_start(p); }
  // The same, for a list of positions (a rank's tokens in local order).
  std::vector<std::int64_t> q_lo(const std::vector<std::int64_t>& positions) const {
    std::vector<std::int64_t> out;
    out.reserve(positions.size());
    for (const auto p : positions) out.push_back(q_lo(p));
    return out;
  }
  std::vector<std::int64_t> rope_positions(const std::vector<std::int64_t>& positions) const {
    std::vector<std::int64_t> out;
    out.reserve(positions.size());
    for (const auto p : positions) out.push_back(rope_position(p));
    return out;
  }
  // "" or what is wrong with the mask (starts negative or not increasing, a negative window).
  std::string problem() const {
    if (window < 0) return "the sliding window (" + std::to_string(window) + ") must be >= 0";
    for (std::size_t d = 0; d < doc_starts.size(); ++d)
      if (doc_starts[d] < 0 || (d > 0 && doc_starts[d] <= doc_starts[d - 1]))
        return "document starts must be increasing positions >= 0 (start " + std::to_string(d) + ": " +
               std::to_string(doc_starts[d]) + ")";
    return "";
  }
};

}  // namespace minilst
