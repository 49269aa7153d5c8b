#include "parallel/sequence_layout.hpp"

namespace minilst {

namespace {
// Balanced cut of n items into m parts: part c is [n c / m, n (c+1) / m).
std::int64_t cut(std::int64_t n, int m, int c) { return n * c / m; }
}  // namespace

SequenceLayout::SequenceLayout(std::int64_t S, int ulysses, int ring, RingLayout layout, bool with_positions)
    : U_(ulysses), R_(ring), positions_(std::size_t(ulysses) * ring), counts_(std::size_t(ulysses) * ring) {
  for (int r = 0; r < R_; ++r) {
    if (!with_positions) {  // the same cuts, counted
      const std::int64_t n = layout == RingLayout::contiguous
                                 ? cut(S, R_, r + 1) - cut(S, R_, r)
                                 : cut(S, 2 * R_, r + 1) - cut(S, 2 * R_, r) + cut(S, 2 * R_, 2 * R_ - r) -
                                       cut(S, 2 * R_, 2 * R_ - 1 - r);
      for (int u = 0; u < U_; ++u) counts_[std::size_t(r) * U_ + u] = cut(n, U_, u + 1) - cut(n, U_, u);
      continue;
    }
    std::vector<std::int64_t> owned;  // ring member r's tokens
    const auto take = [&](std::int64_t b, std::int64_t e) { for (auto p = b; p < e; ++p) owned.push_back(p); };
    if (layout == RingLayout::contiguous) {
      take(cut(S, R_, r), cut(S, R_, r + 1));
    } else {
      take(cut(S, 2 * R_, r), cut(S, 2 * R_, r + 1));
      take(cut(S, 2 * R_, 2 * R_ - 1 - r), cut(S, 2 * R_, 2 * R_ - r));
    }
    const auto n = std::int64_t(owned.size());
    for (int u = 0; u < U_; ++u) {
      positions_[std::size_t(r) * U_ + u].assign(owned.begin() + cut(n, U_, u), owned.begin() + cut(n, U_, u + 1));
      counts_[std::size_t(r) * U_ + u] = cut(n, U_, u + 1) - cut(n, U_, u);
    }
  }
}

std::int64_t SequenceLayout::group_tokens(int r) const {
  std::int64_t n = 0;
  for (int u = 0; u < U_; ++u) n += counts_.at(std::size_t(r) * U_ + u);
  return n;
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
