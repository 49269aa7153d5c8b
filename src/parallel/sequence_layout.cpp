#include "parallel/sequence_layout.hpp"

#include <algorithm>
#include <numeric>

namespace minilst {

namespace {
// Balanced cut of n items into m parts: part c is [n c / m, n (c+1) / m).
std::int64_t cut(std::int64_t n, std::int64_t m, std::int64_t c) { return n * c / m; }

constexpr std::int64_t kBalancedChunk = 256;  // tokens of a balanced layout's chunk, about
}  // namespace

std::vector<std::vector<std::int64_t>> balanced_ring_positions(std::int64_t S, int R, const SequenceMask& mask) {
  // k chunks per member: ~kBalancedChunk tokens each, 2..16, at least one token each.
  const std::int64_t k = std::max<std::int64_t>(1, std::min({S / R, std::int64_t(16),
                                                              std::max<std::int64_t>(2, S / (R * kBalancedChunk))}));
  const std::int64_t n = R * k, small = S / n, big_chunks = S % n;  // chunk sizes: small or small + 1
  struct Chunk {
    std::int64_t begin, end;
    double cost;  // keys its queries see
  };
  // A window in some layers only: both masks' keys, each kind of layer weighing the same (the
  // layer count is not the layout's; the documents' quadratic cost dominates anyway).
  const bool mixed = mask.window > 0 && !mask.window_layers.is_all();
  const SequenceMask windowed = mask.of_layers(true), whole = mask.of_layers(false);
  std::vector<Chunk> chunks;
  for (std::int64_t c = 0; c < n; ++c) {
    Chunk ch{cut(S, n, c), cut(S, n, c + 1), 0.0};
    for (auto p = ch.begin; p < ch.end; ++p)
      ch.cost += mixed ? 0.5 * double(2 * p - windowed.q_lo(p) - whole.q_lo(p) + 2) : double(p - mask.q_lo(p) + 1);
    chunks.push_back(ch);
  }
  // Member r's quota of larger chunks: its contiguous count cut(S, R, r+1) - cut(S, R, r) = k small + quota.
  std::vector<std::int64_t> quota_big(R), quota_small(R);
  for (int r = 0; r < R; ++r) {
    quota_big[r] = cut(big_chunks, R, r + 1) - cut(big_chunks, R, r);
    quota_small[r] = k - quota_big[r];
  }
  std::vector<std::size_t> order(chunks.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return chunks[a].cost > chunks[b].cost; });
  std::vector<double> load(R, 0.0);
  std::vector<std::vector<std::size_t>> owned(R);
  for (const auto c : order) {
    const bool is_big = chunks[c].end - chunks[c].begin > small;
    auto& quota = is_big ? quota_big : quota_small;
    int best = -1;
    for (int r = 0; r < R; ++r)
      if (quota[r] > 0 && (best < 0 || load[r] < load[best])) best = r;
    --quota[best];  // the quotas add up to the chunks of each size: someone has room
    load[best] += chunks[c].cost;
    owned[best].push_back(c);
  }
  std::vector<std::vector<std::int64_t>> positions(R);
  for (int r = 0; r < R; ++r) {
    std::sort(owned[r].begin(), owned[r].end());
    for (const auto c : owned[r])
      for (auto p = chunks[c].begin; p < chunks[c].end; ++p) positions[r].push_back(p);
  }
  return positions;
}

SequenceLayout::SequenceLayout(std::int64_t S, int ulysses, int ring, RingLayout layout, bool with_positions,
                               const SequenceMask& mask)
    : U_(ulysses), R_(ring), positions_(std::size_t(ulysses) * ring), counts_(std::size_t(ulysses) * ring) {
  const auto balanced = layout == RingLayout::balanced && with_positions
                            ? balanced_ring_positions(S, R_, mask)
                            : std::vector<std::vector<std::int64_t>>{};
  for (int r = 0; r < R_; ++r) {
    if (!with_positions) {  // the same cuts, counted (balanced: contiguous's counts)
      const std::int64_t n = layout != RingLayout::zigzag
                                 ? cut(S, R_, r + 1) - cut(S, R_, r)
                                 : cut(S, 2 * R_, r + 1) - cut(S, 2 * R_, r) + cut(S, 2 * R_, 2 * R_ - r) -
                                       cut(S, 2 * R_, 2 * R_ - 1 - r);
      for (int u = 0; u < U_; ++u) counts_[std::size_t(r) * U_ + u] = cut(n, U_, u + 1) - cut(n, U_, u);
      continue;
    }
    std::vector<std::int64_t> owned;  // ring member r's tokens
    const auto take = [&](std::int64_t b, std::int64_t e) { for (auto p = b; p < e; ++p) owned.push_back(p); };
    if (layout == RingLayout::balanced) {
      owned = balanced[r];
    } else if (layout == RingLayout::contiguous) {
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
