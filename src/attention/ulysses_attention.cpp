#include "attention/ulysses_attention.hpp"

#include <stdexcept>

#include "kernels/bf16.hpp"

namespace minilst {

template <class T>
UlyssesAttention<T>::UlyssesAttention(Communicator& group, const AttentionGeometry& g,
                                      std::unique_ptr<AttentionStrategy<T>> inner, PhaseTimers* timers)
    : group_(group), geometry_(g), U_(group.size()), me_(group.rank()), h_(g.head_dim), inner_(std::move(inner)),
      timers_(timers) {
  if (U_ != g.U() || me_ != g.me_ulysses) throw std::logic_error("ulysses: the group differs from the geometry");
}

template <class T>
Tracked<Vec<T>> UlyssesAttention<T>::exchange_buffer(const char* label, const AttentionGeometry& g, bool kv) {
  std::int64_t heads = 0;  // every member's heads: what this rank's tokens are sent to, or received from
  for (int p = 0; p < g.U(); ++p)
    heads += kv ? ulysses_kv_heads(p, g.U(), g.kv_heads).count : ulysses_q_heads(p, g.U(), g.heads).count;
  return Tracked<Vec<T>>(uninitialized, label, MemCategory::comm, g.local_rows * heads * g.head_dim);
}

template <class T>
Tracked<Mat<T>> UlyssesAttention<T>::group_buffer(const char* label, const AttentionGeometry& g, bool kv, bool zero) {
  const std::int64_t cols = std::int64_t(kv ? g.kv_heads_here() : g.q_heads_here()) * g.head_dim;
  return zero ? Tracked<Mat<T>>(label, MemCategory::comm, g.group_rows(), cols)
              : Tracked<Mat<T>>(uninitialized, label, MemCategory::comm, g.group_rows(), cols);
}

template <class T>
void UlyssesAttention<T>::replay_keep_input(const AttentionGeometry& g, int input) {
  exchange_buffer("ulysses_send", g, input > 0);  // q, k or v scattered into the kept set
}

template <class T>
void UlyssesAttention<T>::replay_forward_kept(const AttentionGeometry& g, const std::function<void()>& inner) {
  inner();
  exchange_buffer("ulysses_recv", g, false);
}

template <class T>
void UlyssesAttention<T>::replay_backward(const AttentionGeometry& g, const std::function<void()>& inner) {
  auto d_og = group_buffer("ulysses_do", g, false, false);
  exchange_buffer("ulysses_send", g, false);
  const auto dqg = group_buffer("ulysses_dq", g, false, true), dkg = group_buffer("ulysses_dk", g, true, true),
             dvg = group_buffer("ulysses_dv", g, true, true);
  inner();
  d_og.reset();
  exchange_buffer("ulysses_recv", g, false);
  exchange_buffer("ulysses_recv", g, true);
  exchange_buffer("ulysses_recv", g, true);
}

template <class T>
void UlyssesAttention<T>::scatter_heads(const Mat<T>& y, const Mat<const T>& x, bool kv) {
  const std::int64_t S = x.extent(0), h = h_;
  // Send: for each member p, my rows with p's heads, packed [S, count_p h] one after another.
  std::vector<std::int64_t> sc(U_), sd(U_), rc(U_), rd(U_);
  std::int64_t total = 0;
  for (int p = 0; p < U_; ++p) {
    sd[p] = total;
    sc[p] = S * heads_of(p, kv).count * h;
    total += sc[p];
  }
  const auto send = exchange_buffer("ulysses_send", geometry_, kv);
  for (int p = 0; p < U_; ++p) {
    const auto hp = heads_of(p, kv);
    const std::int64_t off = sd[p], col0 = hp.first * h, w = hp.count * h;
    const auto buf = send.view();
    Kokkos::parallel_for("ulysses_pack", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0},
                         {std::size_t(S), std::size_t(w)}),
        KOKKOS_LAMBDA(const int i, const int c) { buf(off + i * w + c) = x(i, col0 + c); });
  }
  // Receive: member p's rows with my heads, in member order: exactly y's [S_group, count_me h].
  const std::int64_t mine = heads_of(me_, kv).count * h;
  if (std::int64_t(y.extent(0)) != geometry_.group_rows() || std::int64_t(y.extent(1)) != mine)
    throw std::logic_error("ulysses: the scatter's destination has the wrong shape");
  std::int64_t offset = 0;
  for (int p = 0; p < U_; ++p) {
    rd[p] = offset;
    rc[p] = geometry_.member_rows[p] * mine;
    offset += rc[p];
  }
  compat::fence("ulysses: packed");
  ScopedPhase phase(timers_, Phase::alltoall);
  group_.alltoallv(send.view().data(), sc, sd, y.data(), rc, rd, dtype_of<T>(), CommOp::alltoall);
}

template <class T>
void UlyssesAttention<T>::gather_heads(const Mat<T>& x, const Mat<const T>& y, bool kv, bool accumulate) {
  const std::int64_t S = x.extent(0), h = h_, mine = heads_of(me_, kv).count * h;
  // Send: member p's rows of y (contiguous); receive: my rows with p's heads.
  std::vector<std::int64_t> sc(U_), sd(U_), rc(U_), rd(U_);
  std::int64_t offset = 0, total = 0;
  for (int p = 0; p < U_; ++p) {
    sd[p] = offset;
    sc[p] = geometry_.member_rows[p] * mine;
    offset += sc[p];
    rd[p] = total;
    rc[p] = S * heads_of(p, kv).count * h;
    total += rc[p];
  }
  const auto recv = exchange_buffer("ulysses_recv", geometry_, kv);
  compat::fence("ulysses: ready to send");
  {
    ScopedPhase phase(timers_, Phase::alltoall);
    group_.alltoallv(y.data(), sc, sd, recv.view().data(), rc, rd, dtype_of<T>(), CommOp::alltoall);
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
void UlyssesAttention<T>::keep_input(int input, const Mat<const T>& x, const AttentionKept<T>& kept) {
  scatter_heads(input == 0 ? kept.q : input == 1 ? kept.k : kept.v, x, input > 0);
}

template <class T>
void UlyssesAttention<T>::forward_kept(const Mat<T>& o, const Mat<A>& stats, const AttentionKept<T>& kept) {
  inner_->forward(kept.o, stats, kept.q, kept.k, kept.v, kept);  // the inner strategy's local layout is the group's
  gather_heads(o, kept.o, false, false);
}

template <class T>
void UlyssesAttention<T>::forward(const Mat<T>& o, const Mat<A>& stats, const Mat<const T>& q, const Mat<const T>& k,
                                  const Mat<const T>& v, const AttentionKept<T>& kept) {
  keep_input(0, q, kept);
  keep_input(1, k, kept);
  keep_input(2, v, kept);
  forward_kept(o, stats, kept);
}

template <class T>
void UlyssesAttention<T>::backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                                   const Mat<const T>& og, const Mat<const A>& lse, const Mat<const T>& qg,
                                   const Mat<const T>& kg, const Mat<const T>& vg) {
  // og, qg, kg, vg: what forward kept, already head-sharded; only dO travels in.
  auto d_og = group_buffer("ulysses_do", geometry_, false, false);
  scatter_heads(d_og.view(), d_o, false);
  const auto dqg = group_buffer("ulysses_dq", geometry_, false, true), dkg = group_buffer("ulysses_dk", geometry_, true, true),
             dvg = group_buffer("ulysses_dv", geometry_, true, true);
  inner_->backward(dqg.view(), dkg.view(), dvg.view(), d_og.view(), og, lse, qg, kg, vg);
  d_og.reset();
  gather_heads(dq, dqg.view(), false, false);
  gather_heads(dk, dkg.view(), true, true);  // replicated kv heads: sum the replicas
  gather_heads(dv, dvg.view(), true, true);
}

template class UlyssesAttention<float>;
template class UlyssesAttention<double>;
template class UlyssesAttention<bf16>;

}  // namespace minilst
