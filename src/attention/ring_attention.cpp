#include "attention/ring_attention.hpp"

#include <algorithm>
#include <limits>

#include "attention/ring_pass.hpp"
#include "kernels/attention_merge.hpp"
#include "kernels/attention_rsa.hpp"
#include "kernels/bf16.hpp"
#include "kernels/select.hpp"
#include "parallel/fault_injection.hpp"
#include "parallel/ring_reach.hpp"

namespace minilst {

namespace {
constexpr int kTagKV = 11, kTagDKV = 12, kTagAllreduce = 13;

// A block buffer holds K rows then V rows: [rows, Gh] each, both LayoutRight.
template <class T>
Mat<T> k_rows(const Vec<T>& buf, std::int64_t rows, std::int64_t Gh) { return Mat<T>(buf.data(), rows, Gh); }
template <class T>
Mat<T> v_rows(const Vec<T>& buf, std::int64_t rows, std::int64_t Gh) { return Mat<T>(buf.data() + rows * Gh, rows, Gh); }

// A block's rows (query rows, or the RSA backward's key rows) in slices, with a progress call between slices: MPI
// (without a progress thread) moves a large message only inside MPI calls, so
// this is what lets a transfer advance while the block computes.
template <class F>
void in_slices(std::int64_t rows, F&& slice) {
  const std::int64_t n = std::max<std::int64_t>(1, std::min<std::int64_t>(8, rows / 64));
  for (std::int64_t s = 0; s < n; ++s) slice(rows * s / n, rows * (s + 1) / n);
}

template <class V>
auto row_range(const V& v, std::int64_t b, std::int64_t e) {
  return Kokkos::subview(v, Kokkos::make_pair(b, e));
}
// The rows [b, e) of the queries' first visible positions; empty stays empty (causal).
Vec<const std::int64_t> lo_rows(const Vec<const std::int64_t>& q_lo, std::int64_t b, std::int64_t e) {
  return q_lo.extent(0) == 0 ? q_lo : Vec<const std::int64_t>(row_range(q_lo, b, e));
}

template <class To, class From>
void cast_copy(const Mat<To>& to, const Mat<From>& from) {
  Kokkos::parallel_for("cast_copy", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {to.extent(0), to.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int j) { to(i, j) = To(from(i, j)); });
}

// Elements of each member's block in a buffer of `per_row` elements per token.
std::vector<std::int64_t> block_elements(const std::vector<std::int64_t>& rows, std::int64_t per_row) {
  std::vector<std::int64_t> n;
  for (const auto r : rows) n.push_back(r * per_row);
  return n;
}
}  // namespace

template <class T>
typename RingAttention<T>::Dims RingAttention<T>::dims(const AttentionGeometry& g) {
  Dims d;
  d.Sq = g.block_rows.at(g.me_ring);
  for (const auto r : g.block_rows) {
    d.max_rows = std::max(d.max_rows, r);
    d.total_rows += r;
  }
  d.Hl = g.q_heads_here();
  d.Hh = d.Hl * g.head_dim;
  d.Gh = std::int64_t(g.kv_heads_here()) * g.head_dim;
  d.p_in_stats = g.parallel.rsa_seed_backward();
  return d;
}

template <class T>
typename RingAttention<T>::FlashForwardBuffers RingAttention<T>::flash_forward_buffers(const Dims& d) {
  const auto comm = MemCategory::comm, ws = MemCategory::workspace;
  return {{Tracked<Vec<T>>("ring_kv_a", comm, 2 * d.max_rows * d.Gh), Tracked<Vec<T>>("ring_kv_b", comm, 2 * d.max_rows * d.Gh)},
          Tracked<Mat<A>>("ring_o_acc", ws, d.Sq, d.Hh),
          Tracked<Mat<T>>("ring_o_block", ws, d.Sq, d.Hh),
          Tracked<Mat<A>>("ring_lse_block", ws, d.Sq, d.Hl)};
}

template <class T>
typename RingAttention<T>::RsaForwardBuffers RingAttention<T>::rsa_forward_buffers(const Dims& d) {
  const auto comm = MemCategory::comm, ws = MemCategory::workspace;
  return {d.p_in_stats ? Tracked<Mat<A>>() : Tracked<Mat<A>>("rsa_scores", ws, d.Hl * d.Sq, d.total_rows),  // [Hl*Sq, S]
          {Tracked<Vec<T>>("rsa_block_a", comm, d.max_rows * d.Gh), Tracked<Vec<T>>("rsa_block_b", comm, d.max_rows * d.Gh)},
          Tracked<Mat<A>>("rsa_o_acc", ws, d.Sq, d.Hh)};
}

template <class T>
typename RingAttention<T>::BackwardBuffers RingAttention<T>::backward_buffers(const Dims& d) {
  const auto comm = MemCategory::comm, ws = MemCategory::workspace;
  const std::int64_t n = 2 * d.max_rows * d.Gh;
  return {Tracked<Mat<A>>("attn_delta", ws, d.Sq, d.Hl),
          {Tracked<Vec<T>>("ring_kv_a", comm, n), Tracked<Vec<T>>("ring_kv_b", comm, n)},
          Tracked<Vec<T>>("ring_dkv_in", comm, n),
          Tracked<Vec<T>>("ring_dkv_out", comm, n),
          Tracked<Vec<T>>("ring_dkv_block", ws, n)};
}

template <class T>
typename RingAttention<T>::RsaBackwardBuffers RingAttention<T>::rsa_backward_buffers(const Dims& d) {
  const auto comm = MemCategory::comm, ws = MemCategory::workspace;
  return {Tracked<Mat<A>>(uninitialized, "attn_delta", ws, d.Sq, d.Hl),
          {Tracked<Vec<T>>("rsa_block_a", comm, d.max_rows * d.Gh), Tracked<Vec<T>>("rsa_block_b", comm, d.max_rows * d.Gh)},
          Tracked<Mat<A>>(uninitialized, "rsa_dscores", ws, d.Hl * d.Sq, d.total_rows),  // [Hl*Sq, S], as P
          Tracked<Mat<A>>("rsa_dq_acc", ws, d.Sq, d.Hh),
          Tracked<Mat<A>>("rsa_dk_partial", comm, d.total_rows, d.Gh),  // zero: skipped blocks add nothing
          Tracked<Mat<A>>("rsa_dv_partial", comm, d.total_rows, d.Gh),
          Tracked<Vec<A>>(uninitialized, "rsa_allreduce_in", comm, d.max_rows * d.Gh)};
}

template <class T>
std::vector<Tracked<Vec<std::int64_t>>> RingAttention<T>::position_buffers(const AttentionGeometry& g) {
  std::vector<Tracked<Vec<std::int64_t>>> pos;
  for (const auto rows : g.block_rows) pos.emplace_back("ring_positions", MemCategory::workspace, rows);
  return pos;
}

template <class T>
Tracked<Vec<std::int64_t>> RingAttention<T>::q_lo_buffer(const AttentionGeometry& g, bool causal) {
  if (causal) return Tracked<Vec<std::int64_t>>();
  return Tracked<Vec<std::int64_t>>("ring_q_lo", MemCategory::workspace, g.block_rows.at(g.me_ring));
}

template <class T>
void RingAttention<T>::replay_forward(const AttentionGeometry& g) {
  if (g.parallel.variant == RingVariant::rsa)
    rsa_forward_buffers(dims(g));
  else
    flash_forward_buffers(dims(g));
}

template <class T>
void RingAttention<T>::replay_backward(const AttentionGeometry& g) {
  if (g.parallel.rsa_seed_backward())
    rsa_backward_buffers(dims(g));
  else
    backward_buffers(dims(g));
}

template <class T>
RingAttention<T>::RingAttention(Communicator& ring, const AttentionGeometry& g,
                                const std::vector<std::vector<std::int64_t>>& block_positions, const SequenceMask& mask,
                                const KernelChoice& kernels, PhaseTimers* timers)
    : ring_(ring), geometry_(g), me_(ring.rank()), head_dim_(g.head_dim), kernels_(kernels), timers_(timers),
      pos_(position_buffers(g)), q_lo_(q_lo_buffer(g, mask.causal_only())) {
  using HostIds = Kokkos::View<const std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  const auto& q_pos = block_positions.at(me_);
  // Test-only (parallel/fault_injection.hpp, mask_drop): this rank computes with plain causal
  // masks (its q_lo 0), while what travels where stays the sequence's, as on every rank.
  const bool dropped = fault::mask_dropped_here();
  auto q_lo = mask.q_lo(q_pos);  // [Sq] the local queries' first visible positions
  if (dropped) std::fill(q_lo.begin(), q_lo.end(), std::int64_t(0));
  if (!mask.causal_only()) Kokkos::deep_copy(q_lo_.view(), HostIds(q_lo.data(), q_lo.size()));
  std::vector<PositionRanges> members;
  for (int b = 0; b < ring.size(); ++b) {
    const auto& p = block_positions.at(b);
    col_.push_back(b == 0 ? 0 : col_.back() + rows_.back());
    rows_.push_back(std::int64_t(p.size()));
    Kokkos::deep_copy(pos_[b].view(), HostIds(p.data(), p.size()));
    members.push_back(position_ranges(p));
  }
  // Every member's view of every block, from the positions every rank knows: the same
  // decision on every rank (which blocks travel how far, parallel/ring_reach.hpp).
  const auto seen = ring_visibility(members, mask);
  visible_ = dropped ? ring_visibility(members, SequenceMask{}).at(me_) : seen.at(me_);
  reach_ = ring_reach(seen);
}

template <class T>
void RingAttention<T>::forward(const Mat<T>& o, const Mat<A>& lse, const Mat<const T>& q, const Mat<const T>& k,
                               const Mat<const T>& v, const AttentionKept<T>&) {
  if (geometry_.parallel.variant == RingVariant::rsa) {
    forward_rsa(o, lse, q, k, v);
    return;
  }
  const std::int64_t Sq = q.extent(0), Gh = k.extent(1);
  Kokkos::deep_copy(ExecSpace(), lse, -std::numeric_limits<A>::infinity());
  auto b = flash_forward_buffers(dims(geometry_));
  Kokkos::deep_copy(ExecSpace(), k_rows(b.kv[0].view(), rows_[me_], Gh), k);
  Kokkos::deep_copy(ExecSpace(), v_rows(b.kv[0].view(), rows_[me_], Gh), v);
  const auto& q_pos = pos_[me_].view();
  const Vec<const std::int64_t> q_lo = q_lo_.view();
  const Vec<T> kv[2] = {b.kv[0].view(), b.kv[1].view()};
  // A block travels on while a later member sees it (reach_); one no local query sees is not computed.
  ring_pass(ring_, timers_, geometry_.parallel.overlap, kv, block_elements(rows_, 2 * Gh), reach_, kTagKV,
            [&](int t, int blk, const Vec<T>& kv_hop, RingHop& hop) {
              const Vec<T>& kvb = fault::stale_kv_hop(t, ring_.size()) ? kv[(t + 1) % 2] : kv_hop;  // tests only
              if (!visible(blk)) return;
              in_slices(Sq, [&](std::int64_t i0, std::int64_t i1) {
                kernels::attention_forward<T>(kernels_, rows(b.o_block.view(), i0, i1),
                                                      rows(b.lse_block.view(), i0, i1), rows(q, i0, i1),
                                                      k_rows(kvb, rows_[blk], Gh), v_rows(kvb, rows_[blk], Gh),
                                                      row_range(q_pos, i0, i1),
                                                      lo_rows(q_lo, i0, i1), pos_[blk].view(),
                                                      head_dim_);
                hop.progress();
              });
              kernels::attention_merge<T>(b.o_acc.view(), lse, b.o_block.view(), b.lse_block.view(), head_dim_);
            });
  cast_copy(o, b.o_acc.view());
}

template <class T>
template <class Use>
void RingAttention<T>::rsa_pass(const Vec<T> (&blocks)[2], const Mat<const T>& own, Use&& use) {
  const std::int64_t Gh = own.extent(1);
  Kokkos::deep_copy(ExecSpace(), Mat<T>(blocks[0].data(), rows_[me_], Gh), own);
  ring_pass(ring_, timers_, geometry_.parallel.overlap, blocks, block_elements(rows_, Gh), {}, kTagKV,
            [&](int, int blk, const Vec<T>& block, RingHop& hop) {
              use(blk, Mat<const T>(block.data(), rows_[blk], Gh), hop);
            });
}

template <class T>
void RingAttention<T>::forward_rsa(const Mat<T>& o, const Mat<A>& stats, const Mat<const T>& q, const Mat<const T>& k,
                                   const Mat<const T>& v) {
  auto b = rsa_forward_buffers(dims(geometry_));
  // The seed's backward keeps P: the scores are built in the statistics, and no LSE is kept.
  const bool keep_p = geometry_.parallel.rsa_seed_backward();
  const Mat<A> scores = keep_p ? stats : b.scores.view(), lse = keep_p ? Mat<A>() : stats;
  const auto q_pos = pos_[me_].view();
  const Vec<T> blocks[2] = {b.blocks[0].view(), b.blocks[1].view()};
  rsa_pass(blocks, k, [&](int blk, const Mat<const T>& kb, RingHop&) {  // phase 1: scores of every block, masked
    kernels::rsa_scores<T>(scores, col_[blk], q, kb, q_pos, q_lo_.view(), pos_[blk].view(), head_dim_);
  });
  kernels::rsa_softmax<T>(scores, lse);
  rsa_pass(blocks, v, [&](int blk, const Mat<const T>& vb, RingHop&) {  // phase 2: o = P V, block by block
    kernels::rsa_pv<T>(b.o_acc.view(), scores, col_[blk], vb, head_dim_);
  });
  cast_copy(o, b.o_acc.view());
}

template <class T>
void RingAttention<T>::backward_rsa(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                                    const Mat<const T>& o, const Mat<const A>& p, const Mat<const T>& q,
                                    const Mat<const T>& k, const Mat<const T>& v) {
  auto b = rsa_backward_buffers(dims(geometry_));
  const Mat<A> ds = b.dscores.view(), dk_part = b.dk_partial.view(), dv_part = b.dv_partial.view();
  kernels::rsa_delta<T>(b.delta.view(), d_o, o, head_dim_);  // delta_i = rowsum(dO_i o O_i)
  const Vec<T> blocks[2] = {b.blocks[0].view(), b.blocks[1].view()};
  // A visiting block's key rows [j0, j1) at once, with a progress call between slices.
  const auto slices = [&](int blk, RingHop& hop, auto&& slice) {
    if (!visible(blk)) return;  // P_b = 0: its partial rows stay 0, its dS is never read
    in_slices(rows_[blk], [&](std::int64_t j0, std::int64_t j1) {
      slice(col_[blk] + j0, j0, j1);
      hop.progress();
    });
  };
  // Pass 1, V blocks: dV~_b = P_b^T dO (this rank's queries' share); dS_b = P_b o (dO V_b^T - delta).
  rsa_pass(blocks, v, [&](int blk, const Mat<const T>& vb, RingHop& hop) {
    slices(blk, hop, [&](std::int64_t c0, std::int64_t j0, std::int64_t j1) {
      kernels::rsa_dv<T>(rows(dv_part, c0, c0 + (j1 - j0)), p, c0, d_o, head_dim_);
      kernels::rsa_dscores<T>(ds, p, c0, d_o, rows(vb, j0, j1), b.delta.view(), head_dim_);
    });
  });
  // Pass 2, K blocks: dQ += dS_b K_b / sqrt(h); dK~_b = dS_b^T Q / sqrt(h).
  rsa_pass(blocks, k, [&](int blk, const Mat<const T>& kb, RingHop& hop) {
    slices(blk, hop, [&](std::int64_t c0, std::int64_t j0, std::int64_t j1) {
      kernels::rsa_dq<T>(b.dq_acc.view(), ds, c0, rows(kb, j0, j1), head_dim_);
      kernels::rsa_dk<T>(rows(dk_part, c0, c0 + (j1 - j0)), ds, c0, q, head_dim_);
    });
  });
  // Every rank's share of every key summed (the seed's all-reduces); this rank keeps its block's rows.
  const std::int64_t Gh = dk.extent(1);
  const auto offsets = block_elements(col_, Gh), elements = block_elements(rows_, Gh);
  for (const Mat<A>& part : {dk_part, dv_part})
    ring_allreduce(ring_, timers_, Vec<A>(part.data(), part.size()), b.allreduce_in.view(), offsets, elements,
                   kTagAllreduce, CommOp::rsa_allreduce);
  const auto own = [&](const Mat<A>& part) { return Mat<A>(rows(part, col_[me_], col_[me_] + rows_[me_])); };
  cast_copy(dq, b.dq_acc.view());
  cast_copy(dk, own(dk_part));
  cast_copy(dv, own(dv_part));
}

template <class T>
void RingAttention<T>::backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                                const Mat<const T>& o, const Mat<const A>& lse, const Mat<const T>& q,
                                const Mat<const T>& k, const Mat<const T>& v) {
  if (geometry_.parallel.rsa_seed_backward()) {
    backward_rsa(dq, dk, dv, d_o, o, lse, q, k, v);
    return;
  }
  const std::int64_t Sq = q.extent(0), Gh = k.extent(1);
  const int R = ring_.size(), next = (me_ + 1) % R, prev = (me_ - 1 + R) % R;
  Kokkos::deep_copy(ExecSpace(), dq, T(0));
  auto b = backward_buffers(dims(geometry_));
  Kokkos::deep_copy(ExecSpace(), k_rows(b.kv[0].view(), rows_[me_], Gh), k);
  Kokkos::deep_copy(ExecSpace(), v_rows(b.kv[0].view(), rows_[me_], Gh), v);
  const auto q_pos = pos_[me_].view();
  const Vec<const std::int64_t> q_lo = q_lo_.view();
  const Vec<T> kv[2] = {b.kv[0].view(), b.kv[1].view()}, in = b.dkv_in.view(), out = b.dkv_out.view(),
               g = b.dkv_block.view();
  // Two transfers per step: the K/V block moves on (ring_pass, as in the forward, while
  // a later member sees it), and the dK/dV accumulator of a block travels with it:
  // received before this rank adds its part, sent on after (its send completes before
  // the buffer is reused). At the block's last visitor (step reach_[blk]) the
  // accumulator holds every member's part and goes straight home, as two messages
  // received into dk and dv, at the step after (reach_[me_] = R - 1: the plain ring's
  // last hop, after the pass). With reach 0 the home member's own part is the whole.
  // Members that do not see a block add zeros: the sums are the full ring's, bit for bit.
  RingHop acc(ring_, timers_, geometry_.parallel.overlap);
  const int home_step = reach_[me_] + 1, last_visitor = (me_ + reach_[me_]) % R;
  const auto receive_home = [&] {
    acc.receive(dk.data(), std::size_t(rows_[me_] * Gh), dtype_of<T>(), last_visitor, kTagDKV);
    acc.receive(dv.data(), std::size_t(rows_[me_] * Gh), dtype_of<T>(), last_visitor, kTagDKV);
  };
  ring_pass(ring_, timers_, geometry_.parallel.overlap, kv, block_elements(rows_, 2 * Gh), reach_, kTagKV,
            [&](int t, int blk, const Vec<T>& kvb, RingHop& hop) {
              const std::int64_t n = 2 * rows_[blk] * Gh;
              const bool here = t <= reach_[blk];  // the block (and its accumulator) came this far
              if (here && t > 0) acc.receive(in.data(), n, dtype_of<T>(), prev, kTagDKV);
              if (home_step > 1 && t == home_step) receive_home();
              acc.start();
              if (!here) return;
              // This block's dK/dV, computed while the accumulator of the block and the next block travel.
              Kokkos::deep_copy(ExecSpace(), Kokkos::subview(g, Kokkos::make_pair(std::int64_t(0), n)), T(0));
              if (visible(blk)) {
                in_slices(Sq, [&](std::int64_t i0, std::int64_t i1) {  // dq rows (=their own), dK/dV (+=)
                  kernels::attention_backward<T>(
                      kernels_, rows(dq, i0, i1), k_rows(g, rows_[blk], Gh), v_rows(g, rows_[blk], Gh),
                      rows(b.delta.view(), i0, i1), rows(d_o, i0, i1), rows(o, i0, i1), rows(lse, i0, i1),
                      rows(q, i0, i1), k_rows(kvb, rows_[blk], Gh), v_rows(kvb, rows_[blk], Gh),
                      row_range(q_pos, i0, i1), lo_rows(q_lo, i0, i1), pos_[blk].view(),
                      head_dim_);
                  hop.progress();
                  acc.progress();
                });
              }
              acc.finish();  // the incoming accumulator is here, and dkv_out is free again
              if (reach_[blk] == 0) {  // t = 0, blk = me_: nobody else sees this rank's block
                Kokkos::deep_copy(ExecSpace(), dk, k_rows(g, rows_[me_], Gh));
                Kokkos::deep_copy(ExecSpace(), dv, v_rows(g, rows_[me_], Gh));
                return;
              }
              const bool add_in = t > 0;
              Kokkos::parallel_for("ring_dkv_accumulate", Kokkos::RangePolicy<ExecSpace>(0, n),
                  KOKKOS_LAMBDA(const int i) { out(i) = T(g(i) + (add_in ? in(i) : T(0))); });
              if (t < reach_[blk]) {
                acc.send(out.data(), n, dtype_of<T>(), next, kTagDKV);
              } else {  // the last visitor: home, dK rows then dV rows
                acc.send(out.data(), n / 2, dtype_of<T>(), blk, kTagDKV);
                acc.send(out.data() + n / 2, n / 2, dtype_of<T>(), blk, kTagDKV);
              }
            });
  if (home_step == R) receive_home();  // the plain ring's last hop
  acc.finish();
}

template class RingAttention<float>;
template class RingAttention<double>;
template class RingAttention<bf16>;

}  // namespace minilst
