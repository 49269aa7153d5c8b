// The attention family of the time model (time_model.hpp): the strategies' compute and the
// ring's lockstep (local_attention, ring_attention.cpp, ring_pass.hpp), Ulysses' all-to-alls
// (ulysses_attention.cpp).
#include <algorithm>
#include <vector>

#include "core/units.hpp"
#include "parallel/mask_pairs.hpp"
#include "parallel/ring_reach.hpp"
#include "predict/comm_model.hpp"
#include "predict/time_model.hpp"

namespace minilst {

namespace {

// A rank's useful (query, key) pairs against each ring block, its own included, under the
// deck's mask (parallel/mask_pairs.hpp: causal, packed documents, a window; any layout), the
// mean over the layers (a window in some of them only). Causal zigzag: n_me n_b / 2 for every
// other block; contiguous: earlier blocks wholly, later ones not at all; the own block n (n + 1) / 2.
std::vector<double> pairs_per_block(const AttentionGeometry& g, const SequenceLayout& layout, const SequenceMask& mask,
                                    int layers) {
  int windowed = 0;
  for (int l = 0; l < layers; ++l) windowed += mask.windowed(l) ? 1 : 0;
  std::vector<double> pairs(g.R(), 0.0);
  for (int b = 0; b < g.R(); ++b)
    for (const bool w : {false, true}) {
      const int n = w ? windowed : layers - windowed;
      if (n > 0)
        pairs[b] += double(n) / layers *
                    visible_pairs(layout.group_ranges(g.me_ring), layout.group_ranges(b), mask.of_layers(w));
    }
  return pairs;
}

// Per hop t: the slowest member's block compute and the largest transfer; per member: its compute.
struct Lockstep {
  std::vector<double> hop_f, hop_b, xfer_f, xfer_b;  // [R]
  std::vector<double> busy_f, busy_b;                // [sequence-parallel ranks]
};

// Every sequence-parallel rank's geometry priced hop by hop: hop t computes the block that arrived
// t hops ago (4 FLOPs per visible pair and head dim forward, 10 backward) and sends block b's K and
// V (and the backward's dK/dV accumulators) as far as hop_sends says (ring_reach.hpp).
Lockstep price_hops(const PriceContext& c, const LinkRate& p2p_link, double R_fwd, double R_bwd) {
  const PricedStep& sh = c.step;
  const int R = c.g.R(), SP = sh.parallel.sequence_parallel();
  const std::vector<int> reach = R > 1 ? ring_reach(sh.layout, sh.options.mask.of_layers(false)) : std::vector<int>{};
  const double Gh_here = double(c.g.kv_heads_here()) * c.h;
  const bool rsa = sh.parallel.variant == RingVariant::rsa;
  Lockstep k{std::vector<double>(R, 0.0), std::vector<double>(R, 0.0), std::vector<double>(R, 0.0),
             std::vector<double>(R, 0.0), std::vector<double>(SP, 0.0), std::vector<double>(SP, 0.0)};
  for (int s = 0; s < SP; ++s) {
    const auto gs = attention_geometry(sh.model, sh.parallel, sh.layout, s);
    const auto pairs = pairs_per_block(gs, sh.layout, sh.options.mask, sh.model.layers);
    const double q_s = double(gs.q_heads_here()) * c.h;
    for (int t = 0; t < R; ++t) {
      const int b = (gs.me_ring - t + R) % R;
      const double f = 4.0 * pairs[b] * q_s / (R_fwd * kGiga) + 2 * c.t_op;
      const double bw = 10.0 * pairs[b] * q_s / (R_bwd * kGiga) + 2 * c.t_op;
      k.hop_f[t] = std::max(k.hop_f[t], f), k.hop_b[t] = std::max(k.hop_b[t], bw);
      k.busy_f[s] += f, k.busy_b[s] += bw;
      if (t + 1 >= R) continue;  // the last block computed has nothing in flight behind it
      const HopSends sends = hop_sends(t, reach.empty() ? R - 1 : reach[b], R, rsa, sh.parallel.rsa_seed_backward());
      // (head chunks sharing the kv head: every chunk's pass moves it again)
      const double kv = 2.0 * double(gs.block_rows[b]) * Gh_here * c.T * (c.g.kv_chunked() ? 1 : c.g.head_chunks);
      const double fwd_bytes = sends.forward * kv, bwd_bytes = sends.backward * kv;
      if (fwd_bytes > 0) k.xfer_f[t] = std::max(k.xfer_f[t], p2p_link.seconds(fwd_bytes));
      if (bwd_bytes > 0) k.xfer_b[t] = std::max(k.xfer_b[t], p2p_link.seconds(bwd_bytes));
    }
  }
  return k;
}
}  // namespace

// The ring's members run in lockstep: hop t's send/receive pairs each member with its neighbours
// (ring_pass: hop.finish waits for both), so a hop lasts as long as its slowest member's block, or
// its transfer where that is longer (the next block is posted before the current one is computed);
// a hop that exchanges anything also waits for the neighbours' arrival (p2p sync). A layer's
// attention is the busiest member's compute or the passes, whichever is longer; ring_wait is the
// idlest member's wait; RSA's seed backward adds its two ring all-reduces of dK, dV, exposed.
AttentionPrice price_attention(const PriceContext& c) {
  const PricedStep& sh = c.step;
  const Precision p = c.p;
  const AttentionGeometry& g = c.g;
  // attention's rates per useful FLOP, for this problem's tiles (attention_padding) and as a step sustains them
  const int per_kv = g.q_heads_here() / std::max(1, g.kv_heads_here());
  const auto rate = [&](AttentionPass pass) {
    return c.m.attention(p, pass) /
           (c.m.scale(p, PhaseFamily::attention) * c.m.attention_padding(p, pass, per_kv, int(c.h)));
  };
  const double R_fwd = rate(AttentionPass::forward), R_bwd = rate(AttentionPass::backward);
  const int R = g.R(), SP = sh.parallel.sequence_parallel();
  const int ring_stride = sh.parallel.tensor * sh.parallel.ulysses;  // ring neighbours' distance in rank order
  const LinkRate p2p = R > 1 ? c.m.link(LinkOp::p2p, R, ring_stride) : LinkRate{};
  LinkRate p2p_link = p2p;
  p2p_link.sync_us = 0;
  const double hop_sync = p2p.sync_us * kMicro;
  const Lockstep k = price_hops(c, p2p_link, R_fwd, R_bwd);
  double busiest_f = 0, busiest_b = 0, pass_f = 0, pass_b = 0;
  for (int s = 0; s < SP; ++s) busiest_f = std::max(busiest_f, k.busy_f[s]), busiest_b = std::max(busiest_b, k.busy_b[s]);
  for (int t = 0; t < R; ++t) {
    const bool overlap = sh.parallel.overlap;
    pass_f += (overlap ? std::max(k.hop_f[t], k.xfer_f[t]) : k.hop_f[t] + k.xfer_f[t]) + (k.xfer_f[t] > 0 ? hop_sync : 0);
    pass_b += (overlap ? std::max(k.hop_b[t], k.xfer_b[t]) : k.hop_b[t] + k.xfer_b[t]) + (k.xfer_b[t] > 0 ? hop_sync : 0);
  }
  AttentionPrice a;
  for (int s = 0; s < SP && R > 1; ++s)
    a.ring_wait_fwd = std::max(a.ring_wait_fwd, pass_f - k.busy_f[s]), a.ring_wait_bwd = std::max(a.ring_wait_bwd, pass_b - k.busy_b[s]);
  const std::vector<int> reach = R > 1 ? ring_reach(sh.layout, sh.options.mask.of_layers(false)) : std::vector<int>{};
  const auto ring = ring_layer_bytes(g.chunk(), reach, std::uint64_t(c.T), master_bytes(p));
  const double rsa_allreduce = R > 1 && ring.allreduce > 0 ? c.m.link(LinkOp::allreduce, R, ring_stride).seconds(
                                                                  double(ring.allreduce) * g.head_chunks, 2 * g.head_chunks)
                                                            : 0.0;
  a.ring_wait_bwd += rsa_allreduce;
  a.fwd = std::max(busiest_f, pass_f);
  a.bwd = std::max(busiest_b, pass_b) + rsa_allreduce;
  return a;
}

// Ulysses: four all-to-alls forward (q, k, v scatter, o gather), four backward (dO in; dQ, dK, dV
// out), each exposed; the forward's again where the attention is recomputed, four more where
// offload re-derives the kept set. With N head chunks the same bytes go in more calls: q, o, dO
// and dQ once per chunk, k, v, dK and dV too where the chunks split the kv heads (else once).
// On a device (NCCL's communication stream) the gathers of every chunk but the last move while the
// next chunk attends: their share of the bytes (o forward; dQ, and dK, dV where the chunks split the
// kv heads, backward: by width, q heads against kv heads) times (N - 1) / N, at the link's bandwidth,
// is overlappable; on hosts the MPI backend moves them at their wait (docs/time_model.md).
AlltoallPrice price_alltoall(const PriceContext& c) {
  AlltoallPrice a;
  if (c.g.U() <= 1) return a;
  const bool recompute = c.store.recompute_attention(), rederive = c.store.rederive_kept();
  const double N = c.g.head_chunks, kv = c.g.kv_chunked() ? N : 1;
  const double fwd = 2 * N + 2 * kv, bwd = 2 * N + 2 * kv;  // per layer: q, o + k, v; dO, dQ + dK, dV
  const double total = fwd * (recompute ? 2 : 1) + bwd + (rederive ? fwd : 0);
  const LinkRate link = c.m.link(LinkOp::alltoall, c.g.U(), c.step.parallel.tensor);
  const double bytes = double(c.step.comm[CommOp::alltoall]);
  a.total = link.seconds(bytes, c.A * c.L * total);
  a.forward_share = fwd / total;
  if (N > 1 && !c.m.host_same_memory) {
    const double q = c.g.q_heads_here(), k = c.g.kv_heads_here(), pass = 2 * q + 2 * k;  // a pass's widths
    const double passes = (recompute ? 2 : 1) + 1 + (rederive ? 1 : 0);
    const double gathered = (recompute ? 2 : 1) * q + q + (c.g.kv_chunked() ? 2 * k : 0);
    a.overlappable = link.seconds(bytes * gathered / (passes * pass), 0) * (N - 1) / N;
  }
  return a;
}

}  // namespace minilst
