#include "parallel/ring_attention.hpp"

#include <algorithm>
#include <limits>

#include "kernels/attention_merge.hpp"

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
    RequestPtr recv, send;
    if (t + 1 < R_) {
      compat::fence("ring: block ready to send");
      recv = ring_.irecv(buf[1 - cur].view().data(), 2 * rows_[owner(t + 1)] * Gh, dtype_of<T>(), prev_, kTagKV);
      send = ring_.isend(buf[cur].view().data(), 2 * rows_[b] * Gh, dtype_of<T>(), next_, kTagKV, "ring");
      if (!overlap_) {
        ScopedPhase wait(timers_, "ring_wait");
        ring_.wait(recv);
        ring_.wait(send);
      }
    }
    if (visible(b)) {
      const Vec<T> blk = buf[cur].view();
      in_slices(Sq, [&](std::int64_t i0, std::int64_t i1) {
        kernels::attention_forward<T>(rows(o_blk.view(), i0, i1), rows(lse_blk.view(), i0, i1), rows(q, i0, i1),
                                      k_rows(blk, rows_[b], Gh), v_rows(blk, rows_[b], Gh), row_range(q_pos, i0, i1),
                                      pos_[b].view(), head_dim_);
        compat::fence("ring: slice done");
        ring_.test(recv);
        ring_.test(send);
      });
      kernels::attention_merge<T>(o_acc.view(), lse, o_blk.view(), lse_blk.view(), head_dim_);
    }
    if (recv || send) {
      ScopedPhase wait(timers_, "ring_wait");
      ring_.wait(recv);
      ring_.wait(send);
    }
    cur = 1 - cur;
  }
  cast_copy(o, o_acc.view());
}

template <class T>
void RingAttention<T>::forward_rsa(const Mat<T>& o, const Mat<A>& lse, const Mat<const T>& q, const Mat<const T>& k,
                                   const Mat<const T>& v) {
  const std::int64_t Sq = q.extent(0), Hh = q.extent(1), Gh = k.extent(1), h = head_dim_;
  const int Hl = int(Hh / h), group = int(Hh / Gh);
  std::int64_t S = 0;
  std::vector<std::int64_t> col(R_);  // first score column of each block
  for (int b = 0; b < R_; ++b) { col[b] = S; S += rows_[b]; }
  Tracked<Mat<A>> scores("rsa_scores", MemCategory::workspace, Hl * Sq, S);  // [Hl*Sq, S]: the point of RSA
  Tracked<Vec<T>> buf[2] = {Tracked<Vec<T>>("rsa_block_a", MemCategory::comm, max_rows_ * Gh),
                            Tracked<Vec<T>>("rsa_block_b", MemCategory::comm, max_rows_ * Gh)};
  const A scale = A(1) / compat::sqrt(A(h)), neg_inf = -std::numeric_limits<A>::infinity();
  const auto q_pos = pos_[me_].view();
  const auto S_mat = scores.view();

  // One ring pass of K (phase 1) or V (phase 2) blocks; `use` consumes block b.
  auto ring_pass = [&](const Mat<const T>& own, auto&& use) {
    Kokkos::deep_copy(ExecSpace(), Mat<T>(buf[0].view().data(), rows_[me_], Gh), own);
    int cur = 0;
    for (int t = 0; t < R_; ++t) {
      const int b = owner(t);
      RequestPtr recv, send;
      if (t + 1 < R_) {
        compat::fence("rsa: block ready to send");
        recv = ring_.irecv(buf[1 - cur].view().data(), rows_[owner(t + 1)] * Gh, dtype_of<T>(), prev_, kTagKV);
        send = ring_.isend(buf[cur].view().data(), rows_[b] * Gh, dtype_of<T>(), next_, kTagKV, "ring");
      }
      use(b, Mat<const T>(buf[cur].view().data(), rows_[b], Gh));
      ScopedPhase wait(timers_, "ring_wait");
      ring_.wait(recv);
      ring_.wait(send);
      cur = 1 - cur;
    }
  };
  // Phase 1: scores of every block, masked by position.
  ring_pass(k, [&](int b, const Mat<const T>& kb) {
    const auto k_pos = pos_[b].view();
    const std::int64_t c0 = col[b];
    Kokkos::parallel_for("rsa_scores", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0},
                         {std::size_t(Hl), std::size_t(Sq), std::size_t(rows_[b])}),
        KOKKOS_LAMBDA(const int n, const int i, const int j) {
          A s = 0;
          for (int c = 0; c < h; ++c) s += A(q(i, n * h + c)) * A(kb(j, (n / group) * h + c));
          S_mat(n * Sq + i, c0 + j) = k_pos(j) <= q_pos(i) ? scale * s : neg_inf;
        });
  });
  // Softmax of each row, in place; lse of each row.
  Kokkos::parallel_for("rsa_softmax", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0},
                       {std::size_t(Hl), std::size_t(Sq)}),
      KOKKOS_LAMBDA(const int n, const int i) {
        const auto r = n * Sq + i;
        A m = neg_inf;
        for (std::int64_t j = 0; j < S; ++j) m = S_mat(r, j) > m ? S_mat(r, j) : m;
        A sum = 0;
        if (m != neg_inf)
          for (std::int64_t j = 0; j < S; ++j) sum += compat::exp(S_mat(r, j) - m);
        const A l = m == neg_inf ? neg_inf : m + compat::log(sum);
        for (std::int64_t j = 0; j < S; ++j) S_mat(r, j) = l == neg_inf ? A(0) : compat::exp(S_mat(r, j) - l);
        lse(i, n) = l;
      });
  // Phase 2: o = P V, block by block.
  Tracked<Mat<A>> o_acc("rsa_o_acc", MemCategory::workspace, Sq, Hh);
  ring_pass(v, [&](int b, const Mat<const T>& vb) {
    const std::int64_t c0 = col[b], nb = rows_[b];
    const auto O = o_acc.view();
    Kokkos::parallel_for("rsa_pv", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0},
                         {std::size_t(Sq), std::size_t(Hh)}),
        KOKKOS_LAMBDA(const int i, const int col_o) {
          const int n = col_o / h, c = col_o % h;
          A acc = 0;
          for (std::int64_t j = 0; j < nb; ++j) acc += S_mat(n * Sq + i, c0 + j) * A(vb(j, (n / group) * h + c));
          O(i, col_o) += acc;
        });
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
  RequestPtr send_acc;
  int cur = 0;
  for (int t = 0; t < R_; ++t) {
    const int b = owner(t);
    const std::int64_t n = 2 * rows_[b] * Gh;
    RequestPtr recv, send, recv_acc;
    compat::fence("ring: block ready to send");
    if (t + 1 < R_) {
      recv = ring_.irecv(buf[1 - cur].view().data(), 2 * rows_[owner(t + 1)] * Gh, dtype_of<T>(), prev_, kTagKV);
      send = ring_.isend(buf[cur].view().data(), n, dtype_of<T>(), next_, kTagKV, "ring");
    }
    if (t > 0) recv_acc = ring_.irecv(acc_in.view().data(), n, dtype_of<T>(), prev_, kTagDKV);
    if (!overlap_) {
      ScopedPhase wait(timers_, "ring_wait");
      ring_.wait(recv);
      ring_.wait(send);
      ring_.wait(recv_acc);
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
        for (auto* r : {&recv, &send, &recv_acc, &send_acc}) ring_.test(*r);
      });
    }
    {
      ScopedPhase wait(timers_, "ring_wait");
      ring_.wait(recv_acc);
      ring_.wait(send_acc);  // acc_out is free again
    }
    const Vec<T> in = acc_in.view(), out = acc_out.view();
    const bool add_in = t > 0;
    Kokkos::parallel_for("ring_dkv_accumulate", Kokkos::RangePolicy<ExecSpace>(0, n),
        KOKKOS_LAMBDA(const int i) { out(i) = g(i) + (add_in ? in(i) : T(0)); });
    compat::fence("ring: dK/dV ready to send");
    send_acc = ring_.isend(out.data(), n, dtype_of<T>(), next_, kTagDKV, "ring");
    {
      ScopedPhase wait(timers_, "ring_wait");
      ring_.wait(recv);
      ring_.wait(send);
    }
    cur = 1 - cur;
  }
  // The last hop brings this rank's own block home with every rank's contribution.
  RequestPtr home = ring_.irecv(acc_in.view().data(), 2 * rows_[me_] * Gh, dtype_of<T>(), prev_, kTagDKV);
  {
    ScopedPhase wait(timers_, "ring_wait");
    ring_.wait(home);
    ring_.wait(send_acc);
  }
  Kokkos::deep_copy(ExecSpace(), dk, k_rows(acc_in.view(), rows_[me_], Gh));
  Kokkos::deep_copy(ExecSpace(), dv, v_rows(acc_in.view(), rows_[me_], Gh));
}

template class RingAttention<float>;
template class RingAttention<double>;

}  // namespace minilst
