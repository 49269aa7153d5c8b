#include "parallel/sequence_layout.hpp"

namespace minilst {

namespace {
// Balanced cut of n items into m parts: part c is [n c / m, n (c+1) / m).
std::int64_t cut(std::int64_t n, int m, int c) { return n * c / m; }
}  // namespace

SequenceLayout::SequenceLayout(std::int64_t S, int ulysses, int ring, RingLayout layout)
    : U_(ulysses), R_(ring), positions_(std::size_t(ulysses) * ring) {
  for (int r = 0; r < R_; ++r) {
    std::vector<std::int64_t> owned;  // ring member r's tokens
    const auto take = [&](std::int64_t b, std::int64_t e) { for (auto p = b; p < e; ++p) owned.push_back(p); };
    if (layout == RingLayout::contiguous) {
      take(cut(S, R_, r), cut(S, R_, r + 1));
    } else {
      take(cut(S, 2 * R_, r), cut(S, 2 * R_, r + 1));
      take(cut(S, 2 * R_, 2 * R_ - 1 - r), cut(S, 2 * R_, 2 * R_ - r));
    }
    const auto n = std::int64_t(owned.size());
    for (int u = 0; u < U_; ++u)
      positions_[std::size_t(r) * U_ + u].assign(owned.begin() + cut(n, U_, u), owned.begin() + cut(n, U_, u + 1));
  }
}

std::vector<std::int64_t> SequenceLayout::group_positions(int r) const {
  std::vector<std::int64_t> out;
  for (int u = 0; u < U_; ++u) {
    const auto& p = positions_[std::size_t(r) * U_ + u];
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

}  // namespace minilst
