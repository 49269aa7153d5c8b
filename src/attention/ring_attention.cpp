#include "attention/ring_attention.hpp"

#include <algorithm>
#include <limits>

#include "attention/ring_hop.hpp"
#include "kernels/attention_merge.hpp"
#include "kernels/attention_rsa.hpp"

namespace minilst {

namespace {
constexpr int kTagKV = 11, kTagDKV = 12;

// A block buffer holds K rows then V rows: [rows, Gh] each, both LayoutRight.
template <class T>
Mat<T> k_rows(const Vec<T>& buf, std::int64_t rows, std::int64_t Gh) { return Mat<T>(buf.data(), rows, Gh); }
template <class T>
Mat<T> v_rows(const Vec<T>& buf, std::int64_t rows, std::int64_t Gh) { return Mat<T>(buf.data() + rows * Gh, rows, Gh); }

// The block's query rows in slices, with a progress call between slices: MPI
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

template <class To, class From>
void cast_copy(const Mat<To>& to, const Mat<From>& from) {
  Kokkos::parallel_for("cast_copy", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {to.extent(0), to.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int j) { to(i, j) = To(from(i, j)); });
}
}  // namespace

template <class T>
RingAttention<T>::RingAttention(Communicator& ring, const std::vector<std::vector<std::int64_t>>& block_positions,
                                int head_dim, RingVariant variant, bool overlap, PhaseTimers* timers)
    : ring_(ring), R_(ring.size()), me_(ring.rank()), next_((ring.rank() + 1) % ring.size()),
      prev_((ring.rank() - 1 + ring.size()) % ring.size()), head_dim_(head_dim), variant_(variant),
      overlap_(overlap), timers_(timers) {
  for (int b = 0; b < R_; ++b) {
    const auto& p = block_positions.at(b);
    rows_.push_back(std::int64_t(p.size()));
    min_pos_.push_back(p.empty() ? std::numeric_limits<std::int64_t>::max() : *std::min_element(p.begin(), p.end()));
    max_rows_ = std::max(max_rows_, rows_.back());
    pos_.emplace_back("ring_positions", MemCategory::workspace, p.size());
    Kokkos::deep_copy(pos_.back().view(),
                      Kokkos::View<const std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(p.data(), p.size()));
  }
  const auto& mine = block_positions.at(me_);
  if (!mine.empty()) max_q_pos_ = *std::max_element(mine.begin(), mine.end());
}

template <class T>
void RingAttention<T>::forward(const Mat<T>& o, const Mat<A>& lse, const Mat<const T>& q, const Mat<const T>& k,
                               const Mat<const T>& v) {
  const std::int64_t Sq = q.extent(0), Hh = q.extent(1), Gh = k.extent(1), Hl = Hh / head_dim_;
  Kokkos::deep_copy(ExecSpace(), lse, -std::numeric_limits<A>::infinity());
  if (variant_ == RingVariant::rsa) {
    forward_rsa(o, lse, q, k, v);
    return;
  }
  Tracked<Vec<T>> buf[2] = {Tracked<Vec<T>>("ring_kv_a", MemCategory::comm, 2 * max_rows_ * Gh),
                            Tracked<Vec<T>>("ring_kv_b", MemCategory::comm, 2 * max_rows_ * Gh)};
  Kokkos::deep_copy(ExecSpace(), k_rows(buf[0].view(), rows_[me_], Gh), k);
  Kokkos::deep_copy(ExecSpace(), v_rows(buf[0].view(), rows_[me_], Gh), v);
  Tracked<Mat<A>> o_acc("ring_o_acc", MemCategory::workspace, Sq, Hh);
  Tracked<Mat<T>> o_blk("ring_o_block", MemCategory::workspace, Sq, Hh);
  Tracked<Mat<A>> lse_blk("ring_lse_block", MemCategory::workspace, Sq, Hl);
  const auto& q_pos = pos_[me_].view();
  int cur = 0;
  for (int t = 0; t < R_; ++t) {
    const int b = owner(t);
    RingHop hop(ring_, timers_, overlap_);  // the next block arrives while this one computes
    if (t + 1 < R_) {
      hop.receive(buf[1 - cur].view().data(), 2 * rows_[owner(t + 1)] * Gh, dtype_of<T>(), prev_, kTagKV);
      hop.send(buf[cur].view().data(), 2 * rows_[b] * Gh, dtype_of<T>(), next_, kTagKV);
      hop.start();
    }
    if (visible(b)) {
      const Vec<T> blk = buf[cur].view();
      in_slices(Sq, [&](std::int64_t i0, std::int64_t i1) {
        kernels::attention_forward<T>(rows(o_blk.view(), i0, i1), rows(lse_blk.view(), i0, i1), rows(q, i0, i1),
                                      k_rows(blk, rows_[b], Gh), v_rows(blk, rows_[b], Gh), row_range(q_pos, i0, i1),
                                      pos_[b].view(), head_dim_);
        compat::fence("ring: slice done");
        hop.progress();
      });
      kernels::attention_merge<T>(o_acc.view(), lse, o_blk.view(), lse_blk.view(), head_dim_);
    }
    hop.finish();
    cur = 1 - cur;
  }
  cast_copy(o, o_acc.view());
}

template <class T>
void RingAttention<T>::forward_rsa(const Mat<T>& o, const Mat<A>& lse, const Mat<const T>& q, const Mat<const T>& k,
                                   const Mat<const T>& v) {
  const std::int64_t Sq = q.extent(0), Hh = q.extent(1), Gh = k.extent(1), Hl = Hh / head_dim_;
  std::int64_t S = 0;
  std::vector<std::int64_t> col(R_);  // first score column of each block
  for (int b = 0; b < R_; ++b) { col[b] = S; S += rows_[b]; }
  Tracked<Mat<A>> scores("rsa_scores", MemCategory::workspace, Hl * Sq, S);  // [Hl*Sq, S]: the point of RSA
  Tracked<Vec<T>> buf[2] = {Tracked<Vec<T>>("rsa_block_a", MemCategory::comm, max_rows_ * Gh),
                            Tracked<Vec<T>>("rsa_block_b", MemCategory::comm, max_rows_ * Gh)};
  const auto q_pos = pos_[me_].view();

  // One ring pass of K (phase 1) or V (phase 2) blocks; `use` consumes block b.
  auto ring_pass = [&](const Mat<const T>& own, auto&& use) {
    Kokkos::deep_copy(ExecSpace(), Mat<T>(buf[0].view().data(), rows_[me_], Gh), own);
    int cur = 0;
    for (int t = 0; t < R_; ++t) {
      const int b = owner(t);
      RingHop hop(ring_, timers_, overlap_);
      if (t + 1 < R_) {
        hop.receive(buf[1 - cur].view().data(), rows_[owner(t + 1)] * Gh, dtype_of<T>(), prev_, kTagKV);
        hop.send(buf[cur].view().data(), rows_[b] * Gh, dtype_of<T>(), next_, kTagKV);
        hop.start();
      }
      use(b, Mat<const T>(buf[cur].view().data(), rows_[b], Gh));
      hop.finish();
      cur = 1 - cur;
    }
  };
  ring_pass(k, [&](int b, const Mat<const T>& kb) {  // phase 1: scores of every block, masked
    kernels::rsa_scores<T>(scores.view(), col[b], q, kb, q_pos, pos_[b].view(), head_dim_);
  });
  kernels::rsa_softmax<T>(scores.view(), lse);
  Tracked<Mat<A>> o_acc("rsa_o_acc", MemCategory::workspace, Sq, Hh);
  ring_pass(v, [&](int b, const Mat<const T>& vb) {  // phase 2: o = P V, block by block
    kernels::rsa_pv<T>(o_acc.view(), scores.view(), col[b], vb, head_dim_);
  });
  cast_copy(o, o_acc.view());
}

template <class T>
void RingAttention<T>::backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                                const Mat<const T>& o, const Mat<const A>& lse, const Mat<const T>& q,
                                const Mat<const T>& k, const Mat<const T>& v) {
  const std::int64_t Sq = q.extent(0), Gh = k.extent(1), Hl = q.extent(1) / head_dim_;
  const std::int64_t max_n = 2 * max_rows_ * Gh;
  Kokkos::deep_copy(ExecSpace(), dq, T(0));
  Tracked<Mat<A>> delta("attn_delta", MemCategory::workspace, Sq, Hl);
  Tracked<Vec<T>> buf[2] = {Tracked<Vec<T>>("ring_kv_a", MemCategory::comm, max_n),
                            Tracked<Vec<T>>("ring_kv_b", MemCategory::comm, max_n)};
  Tracked<Vec<T>> acc_in("ring_dkv_in", MemCategory::comm, max_n), acc_out("ring_dkv_out", MemCategory::comm, max_n);
  Tracked<Vec<T>> grad("ring_dkv_block", MemCategory::workspace, max_n);
  Kokkos::deep_copy(ExecSpace(), k_rows(buf[0].view(), rows_[me_], Gh), k);
  Kokkos::deep_copy(ExecSpace(), v_rows(buf[0].view(), rows_[me_], Gh), v);
  const auto q_pos = pos_[me_].view();
  // Two transfers per step: the K/V block moves on (as in the forward), and the
  // dK/dV accumulator of a block travels with it: received before this rank adds
  // its part, sent on after (its send completes before the buffer is reused).
  RingHop acc(ring_, timers_, overlap_);
  int cur = 0;
  for (int t = 0; t < R_; ++t) {
    const int b = owner(t);
    const std::int64_t n = 2 * rows_[b] * Gh;
    RingHop kv(ring_, timers_, overlap_);
    if (t + 1 < R_) {
      kv.receive(buf[1 - cur].view().data(), 2 * rows_[owner(t + 1)] * Gh, dtype_of<T>(), prev_, kTagKV);
      kv.send(buf[cur].view().data(), n, dtype_of<T>(), next_, kTagKV);
      kv.start();
    }
    if (t > 0) {
      acc.receive(acc_in.view().data(), n, dtype_of<T>(), prev_, kTagDKV);
      acc.start();
    }
    // This block's dK/dV, computed while the accumulator of the block and the next block travel.
    const Vec<T> g = grad.view();
    Kokkos::deep_copy(ExecSpace(), Kokkos::subview(g, Kokkos::make_pair(std::int64_t(0), n)), T(0));
    if (visible(b)) {
      const Vec<T> blk = buf[cur].view();
      in_slices(Sq, [&](std::int64_t i0, std::int64_t i1) {  // dq rows (=their own), dK/dV (+=)
        kernels::attention_backward<T>(rows(dq, i0, i1), k_rows(g, rows_[b], Gh), v_rows(g, rows_[b], Gh),
                                       rows(delta.view(), i0, i1), rows(d_o, i0, i1), rows(o, i0, i1),
                                       rows(lse, i0, i1), rows(q, i0, i1), k_rows(blk, rows_[b], Gh),
                                       v_rows(blk, rows_[b], Gh), row_range(q_pos, i0, i1), pos_[b].view(), head_dim_);
        compat::fence("ring: slice done");
        kv.progress();
        acc.progress();
      });
    }
    acc.finish();  // the incoming accumulator is here, and acc_out is free again
    const Vec<T> in = acc_in.view(), out = acc_out.view();
    const bool add_in = t > 0;
    Kokkos::parallel_for("ring_dkv_accumulate", Kokkos::RangePolicy<ExecSpace>(0, n),
        KOKKOS_LAMBDA(const int i) { out(i) = g(i) + (add_in ? in(i) : T(0)); });
    acc.send(out.data(), n, dtype_of<T>(), next_, kTagDKV);
    kv.finish();
    cur = 1 - cur;
  }
  // The last hop brings this rank's own block home with every rank's contribution.
  acc.receive(acc_in.view().data(), 2 * rows_[me_] * Gh, dtype_of<T>(), prev_, kTagDKV);
  acc.finish();
  Kokkos::deep_copy(ExecSpace(), dk, k_rows(acc_in.view(), rows_[me_], Gh));
  Kokkos::deep_copy(ExecSpace(), dv, v_rows(acc_in.view(), rows_[me_], Gh));
}

template class RingAttention<float>;
template class RingAttention<double>;

}  // namespace minilst
