#include "parallel/mask_pairs.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace minilst {

namespace {
// sum over p in [u, v) of max(0, alpha p + beta), alpha in {-1, 0, 1}.
double sum_positive(std::int64_t u, std::int64_t v, int alpha, std::int64_t beta) {
  if (alpha == 0) return v > u && beta > 0 ? double(beta) * double(v - u) : 0.0;
  if (alpha > 0) u = std::max(u, 1 - beta);  // p + beta > 0 iff p >= 1 - beta
  else v = std::min(v, beta);                // beta - p > 0 iff p < beta
  if (v <= u) return 0.0;
  const double first = double(alpha * u + beta), last = double(alpha * (v - 1) + beta);
  return double(v - u) * (first + last) / 2;
}
}  // namespace

double visible_pairs(const PositionRange& q, const PositionRange& k, const SequenceMask& mask) {
  if (q.size() <= 0 || k.size() <= 0) return 0.0;
  const std::int64_t w = mask.window, c = k.begin, d = k.end - 1;  // keys [c, d]
  double sum = 0;
  for (std::int64_t x = q.begin; x < q.end;) {
    const std::int64_t s = mask.doc_start(x);
    const auto next = std::upper_bound(mask.doc_starts.begin(), mask.doc_starts.end(), x);
    const std::int64_t y = next == mask.doc_starts.end() ? q.end : std::min(q.end, *next);  // [x, y): one document
    // lo(p) = max(s, c) until the window passes it (p >= max(s, c) + w), then p - w + 1;
    // hi(p) = p up to the last key d, then d.
    const std::int64_t floor = std::max(s, c), slide = w > 0 ? floor + w : y;
    std::vector<std::int64_t> cuts{x, y};
    for (const std::int64_t cut : {slide, d + 1})
      if (cut > x && cut < y) cuts.push_back(cut);
    std::sort(cuts.begin(), cuts.end());
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      const std::int64_t u = cuts[i], v = cuts[i + 1];
      const bool sliding = w > 0 && u >= slide, capped = u > d;
      const int alpha_lo = sliding ? 1 : 0, alpha_hi = capped ? 0 : 1;
      const std::int64_t beta_lo = sliding ? 1 - w : floor, beta_hi = capped ? d : 0;
      sum += sum_positive(u, v, alpha_hi - alpha_lo, beta_hi - beta_lo + 1);  // hi - lo + 1 keys
    }
    x = y;
  }
  return sum;
}

double visible_pairs(const PositionRanges& queries, const PositionRanges& keys, const SequenceMask& mask) {
  double sum = 0;
  for (const auto& q : queries)
    for (const auto& k : keys) sum += visible_pairs(q, k, mask);
  return sum;
}

}  // namespace minilst
