#include "attention/ulysses_attention.hpp"

#include <numeric>

namespace minilst {

template <class T>
UlyssesAttention<T>::UlyssesAttention(Communicator& group, std::vector<std::int64_t> member_rows, int heads,
                                      int kv_heads, int head_dim, std::unique_ptr<AttentionStrategy<T>> inner,
                                      PhaseTimers* timers)
    : group_(group), rows_(std::move(member_rows)), U_(group.size()), me_(group.rank()), H_(heads), G_(kv_heads),
      h_(head_dim), inner_(std::move(inner)), timers_(timers) {
  group_rows_ = std::accumulate(rows_.begin(), rows_.end(), std::int64_t(0));
}

template <class T>
Tracked<Mat<T>> UlyssesAttention<T>::scatter_heads(const Mat<const T>& x, bool kv, const char* label) {
  const std::int64_t S = x.extent(0), width = x.extent(1), h = h_;
  // Send: for each member p, my rows with p's heads, packed [S, count_p h] one after another.
  std::vector<std::int64_t> sc(U_), sd(U_), rc(U_), rd(U_);
  std::int64_t total = 0;
  for (int p = 0; p < U_; ++p) {
    sd[p] = total;
    sc[p] = S * heads_of(p, kv).count * h;
    total += sc[p];
  }
  Tracked<Vec<T>> send(uninitialized, "ulysses_send", MemCategory::comm, total);
  for (int p = 0; p < U_; ++p) {
    const auto hp = heads_of(p, kv);
    const std::int64_t off = sd[p], col0 = hp.first * h, w = hp.count * h;
    const auto buf = send.view();
    Kokkos::parallel_for("ulysses_pack", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0},
                         {std::size_t(S), std::size_t(w)}),
        KOKKOS_LAMBDA(const int i, const int c) { buf(off + i * w + c) = x(i, col0 + c); });
  }
  (void)width;
  // Receive: member p's rows with my heads, in member order: exactly [S_group, count_me h].
  const std::int64_t mine = heads_of(me_, kv).count * h;
  Tracked<Mat<T>> y(uninitialized, label, MemCategory::comm, group_rows_, mine);
  std::int64_t offset = 0;
  for (int p = 0; p < U_; ++p) {
    rd[p] = offset;
    rc[p] = rows_[p] * mine;
    offset += rc[p];
  }
  compat::fence("ulysses: packed");
  ScopedPhase phase(timers_, "alltoall");
  group_.alltoallv(send.view().data(), sc, sd, y.view().data(), rc, rd, dtype_of<T>(), "alltoall");
  return y;
}

template <class T>
void UlyssesAttention<T>::gather_heads(const Mat<T>& x, const Mat<const T>& y, bool kv, bool accumulate) {
  const std::int64_t S = x.extent(0), h = h_, mine = heads_of(me_, kv).count * h;
  // Send: member p's rows of y (contiguous); receive: my rows with p's heads.
  std::vector<std::int64_t> sc(U_), sd(U_), rc(U_), rd(U_);
  std::int64_t offset = 0, total = 0;
  for (int p = 0; p < U_; ++p) {
    sd[p] = offset;
    sc[p] = rows_[p] * mine;
    offset += sc[p];
    rd[p] = total;
    rc[p] = S * heads_of(p, kv).count * h;
    total += rc[p];
  }
  Tracked<Vec<T>> recv(uninitialized, "ulysses_recv", MemCategory::comm, total);
  compat::fence("ulysses: ready to send");
  {
    ScopedPhase phase(timers_, "alltoall");
    group_.alltoallv(y.data(), sc, sd, recv.view().data(), rc, rd, dtype_of<T>(), "alltoall");
  }
  if (accumulate) Kokkos::deep_copy(ExecSpace(), x, T(0));
  for (int p = 0; p < U_; ++p) {  // members in order: replicas summed deterministically
    const auto hp = heads_of(p, kv);
    const std::int64_t off = rd[p], col0 = hp.first * h, w = hp.count * h;
    const auto buf = recv.view();
    Kokkos::parallel_for("ulysses_unpack", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0},
                         {std::size_t(S), std::size_t(w)}),
        KOKKOS_LAMBDA(const int i, const int c) {
          if (accumulate) x(i, col0 + c) += buf(off + i * w + c);
          else x(i, col0 + c) = buf(off + i * w + c);
        });
  }
}

template <class T>
void UlyssesAttention<T>::forward(const Mat<T>& o, const Mat<A>& stats, const Mat<const T>& q, const Mat<const T>& k,
                                  const Mat<const T>& v) {
  auto qg = scatter_heads(q, false, "ulysses_q");
  auto kg = scatter_heads(k, true, "ulysses_k");
  auto vg = scatter_heads(v, true, "ulysses_v");
  Tracked<Mat<T>> og("ulysses_o", MemCategory::comm, group_rows_, qg.view().extent(1));
  inner_->forward(og.view(), stats, qg.view(), kg.view(), vg.view());
  gather_heads(o, og.view(), false, false);
}

template <class T>
void UlyssesAttention<T>::backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                                   const Mat<const T>& o, const Mat<const A>& lse, const Mat<const T>& q,
                                   const Mat<const T>& k, const Mat<const T>& v) {
  auto d_og = scatter_heads(d_o, false, "ulysses_do");
  auto og = scatter_heads(o, false, "ulysses_o");
  auto qg = scatter_heads(q, false, "ulysses_q");
  auto kg = scatter_heads(k, true, "ulysses_k");
  auto vg = scatter_heads(v, true, "ulysses_v");
  Tracked<Mat<T>> dqg("ulysses_dq", MemCategory::comm, group_rows_, qg.view().extent(1));
  Tracked<Mat<T>> dkg("ulysses_dk", MemCategory::comm, group_rows_, kg.view().extent(1));
  Tracked<Mat<T>> dvg("ulysses_dv", MemCategory::comm, group_rows_, kg.view().extent(1));
  inner_->backward(dqg.view(), dkg.view(), dvg.view(), d_og.view(), og.view(), lse, qg.view(), kg.view(), vg.view());
  d_og.reset();
  og.reset();
  qg.reset();
  gather_heads(dq, dqg.view(), false, false);
  gather_heads(dk, dkg.view(), true, true);  // replicated kv heads: sum the replicas
  gather_heads(dv, dvg.view(), true, true);
}

template class UlyssesAttention<float>;
template class UlyssesAttention<double>;

}  // namespace minilst
