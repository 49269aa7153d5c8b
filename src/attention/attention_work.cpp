#include "attention/attention_work.hpp"

#include <algorithm>

#include "core/kernel_choice.hpp"
#include "parallel/ring_reach.hpp"

namespace minilst {

AttentionTiles attention_tiles(const KernelChoice& k, Precision precision, int group) {
  const auto stacked = [group](std::int64_t rows) { return std::max<std::int64_t>(1, rows / group); };
  if (k.variant == KernelVariant::reference) return {1, 1};
  if (k.attention == AttentionKernel::tensor_core) return {64, 64};
  if (k.attention == AttentionKernel::onednn && precision == Precision::bf16) return {stacked(256), 256};
  return {(64 + group - 1) / group, 64};  // portable (kernels/attention.hpp: R = ceil(64 / group))
}

namespace {
struct Range {
  std::int64_t lo, hi;
};
Range range_of(const std::vector<std::int64_t>& v, std::int64_t b, std::int64_t e) {
  const auto [lo, hi] = std::minmax_element(v.begin() + b, v.begin() + e);
  return {*lo, *hi};
}
}  // namespace

TileCount computed_tiles(const std::vector<std::int64_t>& q_pos, const std::vector<std::int64_t>& q_lo,
                         const std::vector<std::int64_t>& k_pos, AttentionTiles t) {
  TileCount c;
  const auto Sq = std::int64_t(q_pos.size()), Sk = std::int64_t(k_pos.size());
  if (Sq == 0 || Sk == 0) return c;
  const auto lo_of = [&](std::int64_t i) { return q_lo.empty() ? std::int64_t(0) : q_lo[i]; };
  if (t.rows == 1 && t.keys == 1) {  // element by element: the keys in [q_lo_i, q_pos_i]
    std::vector<std::int64_t> keys(k_pos);
    std::sort(keys.begin(), keys.end());
    for (std::int64_t i = 0; i < Sq; ++i)
      c.pairs += std::max<std::int64_t>(
          0, std::upper_bound(keys.begin(), keys.end(), q_pos[i]) - std::lower_bound(keys.begin(), keys.end(), lo_of(i)));
    c.key_rows = c.query_rows = c.pairs;
    return c;
  }
  std::vector<Range> blocks;  // key blocks' position ranges
  for (std::int64_t j0 = 0; j0 < Sk; j0 += t.keys) blocks.push_back(range_of(k_pos, j0, std::min(Sk, j0 + t.keys)));
  for (std::int64_t i0 = 0; i0 < Sq; i0 += t.rows) {
    const std::int64_t i1 = std::min(Sq, i0 + t.rows), nq = i1 - i0;
    const std::int64_t q_max = range_of(q_pos, i0, i1).hi;
    std::int64_t lo_min = lo_of(i0);
    for (auto i = i0 + 1; i < i1; ++i) lo_min = std::min(lo_min, lo_of(i));
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      if (blocks[b].lo > q_max || blocks[b].hi < lo_min) continue;  // the kernels' nothing_visible
      const std::int64_t nk = std::min<std::int64_t>(t.keys, Sk - std::int64_t(b) * t.keys);
      c.pairs += nq * nk;
      c.key_rows += nk;
      c.query_rows += nq;
    }
  }
  return c;
}

namespace {
// The ring's slices of Sq query rows (ring_attention.cpp's in_slices): [Sq s / n, Sq (s+1) / n).
TileCount sliced_tiles(const std::vector<std::int64_t>& q_pos, const std::vector<std::int64_t>& q_lo,
                       const std::vector<std::int64_t>& k_pos, AttentionTiles t) {
  const auto Sq = std::int64_t(q_pos.size());
  const std::int64_t n = std::max<std::int64_t>(1, std::min<std::int64_t>(8, Sq / 64));
  TileCount sum;
  for (std::int64_t s = 0; s < n; ++s) {
    const auto b = Sq * s / n, e = Sq * (s + 1) / n;
    const std::vector<std::int64_t> qp(q_pos.begin() + b, q_pos.begin() + e);
    const std::vector<std::int64_t> ql = q_lo.empty() ? q_lo : std::vector<std::int64_t>(q_lo.begin() + b, q_lo.begin() + e);
    const auto c = computed_tiles(qp, ql, k_pos, t);
    sum.pairs += c.pairs;
    sum.key_rows += c.key_rows;
    sum.query_rows += c.query_rows;
  }
  return sum;
}
}  // namespace

AttentionWork attention_work(const AttentionGeometry& g, const SequenceLayout& layout, const SequenceMask& mask,
                             AttentionTiles tiles, std::uint64_t T) {
  if (g.head_chunks > 1) {  // head-chunked Ulysses: N passes of one chunk's heads (a shared kv head streams N times)
    AttentionWork w = attention_work(g.chunk(), layout, mask, tiles, T);
    const double N = g.head_chunks;
    for (double* x : {&w.flops_forward, &w.flops_backward, &w.bytes_forward, &w.bytes_backward}) *x *= N;
    for (auto* v : {&w.hop_flops_forward, &w.hop_flops_backward, &w.hop_bytes_forward, &w.hop_bytes_backward})
      for (double& x : *v) x *= N;
    return w;
  }
  const double h = g.head_dim, Hl = g.q_heads_here(), Gl = g.kv_heads_here(), group = Hl / Gl, Tb = double(T);
  const double fwd_pair = 4 * h * Hl, bwd_pair = 10 * h * Hl;
  const auto key_bytes = [&](double key_rows) { return 2 * key_rows * Gl * h * Tb; };      // K and V rows
  const auto query_bytes = [&](double rows) { return 2 * rows * group * Gl * h * Tb; };    // Q and dO rows
  AttentionWork w;
  const int R = g.R(), me = g.me_ring;
  if (R == 1) {  // local attention over this rank's tokens (a Ulysses group's: all of them)
    const auto pos = layout.group_positions(me);
    const auto c = computed_tiles(pos, layout.group_q_lo(me, mask), pos, tiles);
    w.flops_forward = fwd_pair * double(c.pairs);
    w.flops_backward = bwd_pair * double(c.pairs);
    w.bytes_forward = key_bytes(double(c.key_rows));
    w.bytes_backward = query_bytes(double(c.query_rows));
    w.hop_flops_forward = {w.flops_forward};
    w.hop_flops_backward = {w.flops_backward};
    w.hop_bytes_forward = w.hop_bytes_backward = {0.0};
    return w;
  }
  const auto q_pos = layout.group_positions(me);
  const auto q_lo = layout.group_q_lo(me, mask);
  const bool rsa = g.parallel.variant == RingVariant::rsa, seed = g.parallel.rsa_seed_backward();
  for (auto* v : {&w.hop_flops_forward, &w.hop_flops_backward, &w.hop_bytes_forward, &w.hop_bytes_backward})
    v->assign(R, 0.0);
  const auto visible = ring_visibility(ring_member_ranges(layout), mask);
  const auto reach = ring_reach(visible);
  for (int t = 0; t < R; ++t) {
    const int b = (me - t + R) % R;
    const auto k_pos = layout.group_positions(b);
    const double rows = double(k_pos.size()), block = key_bytes(rows);  // a K/V block's bytes
    const bool seen = visible[me][b];
    const TileCount c = seen && !(rsa && seed) ? sliced_tiles(q_pos, q_lo, k_pos, tiles) : TileCount{};
    double fwd = 0, bwd = 0;
    if (rsa) {  // every block whole
      fwd = fwd_pair * double(q_pos.size()) * rows;
      w.bytes_forward += block;
    } else if (seen) {
      fwd = fwd_pair * double(c.pairs);
      w.bytes_forward += key_bytes(double(c.key_rows));
    }
    if (seed) {  // the visible blocks whole, from the kept P
      if (seen) {
        bwd = 8 * h * Hl * double(q_pos.size()) * rows;
        w.bytes_backward += block;
      }
    } else if (seen) {
      bwd = bwd_pair * double(c.pairs);
      w.bytes_backward += query_bytes(double(c.query_rows));
    }
    w.flops_forward += fwd;
    w.flops_backward += bwd;
    w.hop_flops_forward[t] = fwd;
    w.hop_flops_backward[t] = bwd;
    // Sent at hop t: what hop_sends counts (ring_reach.hpp), a block's bytes each.
    const HopSends sends = hop_sends(t, reach[b], R, rsa, seed);
    w.hop_bytes_forward[t] = sends.forward * block;
    w.hop_bytes_backward[t] = sends.backward * block;
  }
  return w;
}

StepAttentionWork step_attention_work(const ModelConfig& cfg, const AttentionGeometry& g, const SequenceLayout& layout,
                                      const SequenceMask& mask, AttentionTiles tiles, std::uint64_t T, int grad_accum,
                                      bool recompute) {
  StepAttentionWork s;
  const double passes = recompute ? 2 : 1;
  int windowed = 0;
  for (int l = 0; l < cfg.layers; ++l) windowed += mask.windowed(l) ? 1 : 0;
  const int counts[2] = {cfg.layers - windowed, windowed};
  for (const int wnd : {0, 1}) {
    if (counts[wnd] == 0) continue;
    const auto w = attention_work(g, layout, mask.of_layers(wnd == 1), tiles, T);
    const double n = double(counts[wnd]) * grad_accum;
    s.flops_forward += n * passes * w.flops_forward;
    s.flops_backward += n * w.flops_backward;
    s.bytes_forward += n * passes * w.bytes_forward;
    s.bytes_backward += n * w.bytes_backward;
    const std::size_t R = w.hop_flops_forward.size();
    s.hop_flops.resize(R, 0.0);
    s.hop_bytes.resize(R, 0.0);
    for (std::size_t t = 0; t < R; ++t) {
      s.hop_flops[t] += n * (passes * w.hop_flops_forward[t] + w.hop_flops_backward[t]);
      s.hop_bytes[t] += n * (passes * w.hop_bytes_forward[t] + w.hop_bytes_backward[t]);
    }
  }
  return s;
}

}  // namespace minilst
