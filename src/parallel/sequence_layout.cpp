#include "parallel/sequence_layout.hpp"

#include <algorithm>
#include <numeric>

namespace minilst {

namespace {
// Balanced cut of n items into m parts: part c is [n c / m, n (c+1) / m).
std::int64_t cut(std::int64_t n, std::int64_t m, std::int64_t c) { return n * c / m; }

constexpr std::int64_t kBalancedChunk = 256;  // tokens of a balanced layout's chunk, about
}  // namespace

namespace {
// The sum over positions p in [b, e) of the keys p sees under `mask`, p - q_lo(p) + 1
// (causal: p + 1; documents: p - doc_start(p) + 1; a window w: at most w), in closed form
// per document piece: sum over j in [lo, hi] of min(j, w), j = p - doc_start + 1.
double visible_keys(std::int64_t b, std::int64_t e, const SequenceMask& mask) {
  const auto ramp = [](double lo, double hi) { return hi < lo ? 0.0 : (hi - lo + 1) * (lo + hi) / 2; };  // lo + .. + hi
  double sum = 0;
  for (std::int64_t x = b; x < e;) {
    const std::int64_t s = mask.doc_start(x);
    const auto next = std::upper_bound(mask.doc_starts.begin(), mask.doc_starts.end(), x);
    const std::int64_t y = next == mask.doc_starts.end() ? e : std::min(e, *next);  // [x, y): one document's
    const std::int64_t lo = x - s + 1, hi = y - s, w = mask.window;
    if (w == 0 || hi <= w)
      sum += ramp(double(lo), double(hi));
    else if (lo > w)
      sum += double(w) * double(hi - lo + 1);
    else
      sum += ramp(double(lo), double(w)) + double(w) * double(hi - w);
    x = y;
  }
  return sum;
}

// Consecutive positions as ranges (in the given order; runs of p, p + 1, ...).
void append_range(PositionRanges& ranges, std::int64_t b, std::int64_t e) {
  if (e <= b) return;
  if (!ranges.empty() && ranges.back().end == b)
    ranges.back().end = e;
  else
    ranges.push_back({b, e});
}
}  // namespace

std::vector<PositionRanges> balanced_ring_ranges(std::int64_t S, int R, const SequenceMask& mask) {
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
    const std::int64_t b = cut(S, n, c), e = cut(S, n, c + 1);
    chunks.push_back({b, e, mixed ? 0.5 * (visible_keys(b, e, windowed) + visible_keys(b, e, whole))
                                  : visible_keys(b, e, mask)});
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
  std::vector<PositionRanges> ranges(R);
  for (int r = 0; r < R; ++r) {
    std::sort(owned[r].begin(), owned[r].end());
    for (const auto c : owned[r]) append_range(ranges[r], chunks[c].begin, chunks[c].end);
  }
  return ranges;
}

std::vector<std::vector<std::int64_t>> balanced_ring_positions(std::int64_t S, int R, const SequenceMask& mask) {
  std::vector<std::vector<std::int64_t>> positions;
  for (const auto& ranges : balanced_ring_ranges(S, R, mask)) {
    positions.emplace_back();
    for (const auto& rg : ranges)
      for (auto p = rg.begin; p < rg.end; ++p) positions.back().push_back(p);
  }
  return positions;
}

SequenceLayout::SequenceLayout(std::int64_t S, int ulysses, int ring, RingLayout layout, bool with_positions,
                               const SequenceMask& mask)
    : U_(ulysses), R_(ring), positions_(std::size_t(ulysses) * ring), counts_(std::size_t(ulysses) * ring),
      ranges_(std::size_t(ring)) {
  if (layout == RingLayout::balanced) ranges_ = balanced_ring_ranges(S, R_, mask);
  for (int r = 0; r < R_; ++r) {
    auto& ranges = ranges_[r];  // ring member r's tokens
    if (layout == RingLayout::contiguous) {
      append_range(ranges, cut(S, R_, r), cut(S, R_, r + 1));
    } else if (layout == RingLayout::zigzag) {
      append_range(ranges, cut(S, 2 * R_, r), cut(S, 2 * R_, r + 1));
      append_range(ranges, cut(S, 2 * R_, 2 * R_ - 1 - r), cut(S, 2 * R_, 2 * R_ - r));
    }
    std::int64_t n = 0;
    for (const auto& rg : ranges) n += rg.size();
    std::vector<std::int64_t> owned;
    if (with_positions)
      for (const auto& rg : ranges)
        for (auto p = rg.begin; p < rg.end; ++p) owned.push_back(p);
    for (int u = 0; u < U_; ++u) {
      counts_[std::size_t(r) * U_ + u] = cut(n, U_, u + 1) - cut(n, U_, u);
      if (with_positions)
        positions_[std::size_t(r) * U_ + u].assign(owned.begin() + cut(n, U_, u), owned.begin() + cut(n, U_, u + 1));
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
