#include "attention/ulysses_attention.hpp"

#include <stdexcept>

#include "kernels/bf16.hpp"

namespace minilst {

template <class T>
UlyssesAttention<T>::UlyssesAttention(Communicator& group, const AttentionGeometry& g,
                                      std::unique_ptr<AttentionStrategy<T>> inner, PhaseTimers* timers)
    : group_(group), geometry_(g), U_(group.size()), me_(group.rank()), h_(g.head_dim), N_(g.head_chunks),
      inner_(std::move(inner)), timers_(timers) {
  if (U_ != g.U() || me_ != g.me_ulysses) throw std::logic_error("ulysses: the group differs from the geometry");
}

template <class T>
Tracked<Vec<T>> UlyssesAttention<T>::exchange_buffer(const char* label, const AttentionGeometry& g, bool kv) {
  std::int64_t heads = 0;  // every member's heads of a chunk: what this rank's tokens are sent to, or received from
  for (int p = 0; p < g.U(); ++p) heads += g.chunk_heads(p, kv, 0).count;
  return Tracked<Vec<T>>(uninitialized, label, MemCategory::comm, g.local_rows * heads * g.head_dim);
}

template <class T>
Tracked<Mat<T>> UlyssesAttention<T>::group_buffer(const char* label, const AttentionGeometry& g, bool kv, bool zero) {
  const std::int64_t cols = std::int64_t(kv ? g.chunk_kv_heads() : g.chunk_q_heads()) * g.head_dim;
  return zero ? Tracked<Mat<T>>(label, MemCategory::comm, g.group_rows(), cols)
              : Tracked<Mat<T>>(uninitialized, label, MemCategory::comm, g.group_rows(), cols);
}

template <class T>
void UlyssesAttention<T>::replay_keep_input(const AttentionGeometry& g, int input) {
  const int sends = input > 0 && !g.kv_chunked() ? 1 : g.head_chunks;
  for (int c = 0; c < sends; ++c) exchange_buffer("ulysses_send", g, input > 0);  // q, k or v scattered into the kept set
}

template <class T>
void UlyssesAttention<T>::replay_forward_kept(const AttentionGeometry& g, const std::function<void()>& inner) {
  Tracked<Vec<T>> home;  // chunk c - 1's o on its way while chunk c attends
  for (int c = 0; c < g.head_chunks; ++c) {
    inner();
    home = Tracked<Vec<T>>();
    home = exchange_buffer("ulysses_recv", g, false);
  }
}

template <class T>
void UlyssesAttention<T>::replay_backward(const AttentionGeometry& g, bool inner_adds_kv,
                                          const std::function<void()>& inner) {
  const int N = g.head_chunks;
  const bool shared_kv = !g.kv_chunked(), adds = shared_kv && inner_adds_kv;
  Tracked<Mat<T>> dkg_shared, dvg_shared;
  if (shared_kv) dkg_shared = group_buffer("ulysses_dk", g, true, true), dvg_shared = group_buffer("ulysses_dv", g, true, true);
  std::vector<Gather> home;
  for (int c = 0; c < N; ++c) {
    auto d_og = group_buffer("ulysses_do", g, false, false);
    exchange_buffer("ulysses_send", g, false);
    auto dqg = group_buffer("ulysses_dq", g, false, true);
    Tracked<Mat<T>> dkg, dvg;
    if (!shared_kv) dkg = group_buffer("ulysses_dk", g, true, true), dvg = group_buffer("ulysses_dv", g, true, true);
    else if (!adds) dkg = group_buffer("ulysses_dk_chunk", g, true, true), dvg = group_buffer("ulysses_dv_chunk", g, true, true);
    inner();
    d_og.reset();
    if (shared_kv && !adds) dkg.reset(), dvg.reset();
    for (auto& h : home) h = Gather{};
    home.clear();
    const auto send = [&](Tracked<Mat<T>> source, bool kv) {
      home.push_back(Gather{Mat<T>(), kv, c, std::move(source), exchange_buffer("ulysses_recv", g, kv), nullptr, {}});
      if (c == N - 1) home.back() = Gather{};
    };
    send(std::move(dqg), false);
    if (!shared_kv) send(std::move(dkg), true), send(std::move(dvg), true);
  }
  for (auto& h : home) h = Gather{};
  if (shared_kv) {
    exchange_buffer("ulysses_recv", g, true);
    exchange_buffer("ulysses_recv", g, true);
  }
}

template <class T>
void UlyssesAttention<T>::scatter_heads(const Mat<T>& y, const Mat<const T>& x, bool kv, int chunk) {
  const std::int64_t S = x.extent(0), h = h_;
  // Send: for each member p, my rows with p's heads of the chunk, packed [S, count_p h] one after another.
  std::vector<std::int64_t> sc(U_), sd(U_), rc(U_), rd(U_);
  std::int64_t total = 0;
  for (int p = 0; p < U_; ++p) {
    sd[p] = total;
    sc[p] = S * heads_of(p, kv, chunk).count * h;
    total += sc[p];
  }
  const auto send = exchange_buffer("ulysses_send", geometry_, kv);
  for (int p = 0; p < U_; ++p) {
    const auto hp = heads_of(p, kv, chunk);
    const std::int64_t off = sd[p], col0 = hp.first * h, w = hp.count * h;
    const auto buf = send.view();
    Kokkos::parallel_for("ulysses_pack", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0},
                         {std::size_t(S), std::size_t(w)}),
        KOKKOS_LAMBDA(const int i, const int c) { buf(off + i * w + c) = x(i, col0 + c); });
  }
  // Receive: member p's rows with my heads of the chunk, in member order: exactly y's [S_group, count_me h].
  const std::int64_t mine = heads_of(me_, kv, chunk).count * h;
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
typename UlyssesAttention<T>::Gather UlyssesAttention<T>::start_gather(const Mat<T>& x, const Mat<const T>& y, bool kv,
                                                                       int chunk, Tracked<Mat<T>> source) {
  const std::int64_t S = x.extent(0), h = h_, mine = heads_of(me_, kv, chunk).count * h;
  // Send: member p's rows of y (contiguous); receive: my rows with p's heads of the chunk.
  Gather g{x, kv, chunk, std::move(source), exchange_buffer("ulysses_recv", geometry_, kv), nullptr, {}};
  std::vector<std::int64_t> sc(U_), sd(U_), rc(U_);
  g.rd.resize(std::size_t(U_));
  std::int64_t offset = 0, total = 0;
  for (int p = 0; p < U_; ++p) {
    sd[p] = offset;
    sc[p] = geometry_.member_rows[p] * mine;
    offset += sc[p];
    g.rd[p] = total;
    rc[p] = S * heads_of(p, kv, chunk).count * h;
    total += rc[p];
  }
  compat::fence("ulysses: ready to send");
  ScopedPhase phase(timers_, Phase::alltoall);
  g.request = group_.ialltoallv(y.data(), sc, sd, g.recv.view().data(), rc, g.rd, dtype_of<T>(), CommOp::alltoall);
  return g;
}

template <class T>
void UlyssesAttention<T>::finish_gather(Gather& g) {
  if (!g.recv.bytes()) return;  // none in flight
  {
    ScopedPhase phase(timers_, Phase::alltoall);
    group_.wait(g.request);
  }
  const std::int64_t S = g.x.extent(0), h = h_;
  const bool add = g.kv;
  const auto x = g.x;
  for (int p = 0; p < U_; ++p) {  // members in order: replicas summed deterministically
    const auto hp = heads_of(p, g.kv, g.chunk);
    const std::int64_t off = g.rd[p], col0 = hp.first * h, w = hp.count * h;
    const auto buf = g.recv.view();
    Kokkos::parallel_for("ulysses_unpack", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0},
                         {std::size_t(S), std::size_t(w)}),
        KOKKOS_LAMBDA(const int i, const int c) {
          if (add) x(i, col0 + c) += buf(off + i * w + c);
          else x(i, col0 + c) = buf(off + i * w + c);
        });
  }
  g = Gather{};
}

template <class T>
void UlyssesAttention<T>::keep_input(int input, const Mat<const T>& x, const AttentionKept<T>& kept) {
  const bool kv = input > 0;
  const Mat<T>& whole = input == 0 ? kept.q : input == 1 ? kept.k : kept.v;
  const int sends = kv && !geometry_.kv_chunked() ? 1 : N_;  // a shared kv head travels once
  for (int c = 0; c < sends; ++c) scatter_heads(kept_chunk(whole, kv, c), x, kv, c);
}

template <class T>
void UlyssesAttention<T>::forward_kept(const Mat<T>& o, const Mat<A>& stats, const AttentionKept<T>& kept) {
  Gather home;  // the previous chunk's o, on its way home while this chunk attends
  for (int c = 0; c < N_; ++c) {
    const AttentionKept<T> kc{kept_chunk(kept.q, false, c), kept_chunk(kept.k, true, c), kept_chunk(kept.v, true, c),
                              kept_chunk(kept.o, false, c)};
    inner_->forward(kc.o, stats_chunk(stats, c), kc.q, kc.k, kc.v, kc);  // the inner strategy's local layout is the group's
    finish_gather(home);
    home = start_gather(o, kc.o, false, c);
    if (c == N_ - 1) finish_gather(home);
  }
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
  Kokkos::deep_copy(ExecSpace(), dk, T(0));  // the kv gathers add (replicas, chunks)
  Kokkos::deep_copy(ExecSpace(), dv, T(0));
  if (geometry_.kv_chunked()) {
    backward_chunks(dq, dk, dv, d_o, og, lse, qg, kg, vg, Mat<T>(), Mat<T>());
    return;
  }
  // Every chunk reads the member's one kv head: its dK, dV summed over the chunks, then home once.
  const auto dkg = group_buffer("ulysses_dk", geometry_, true, true), dvg = group_buffer("ulysses_dv", geometry_, true, true);
  backward_chunks(dq, dk, dv, d_o, og, lse, qg, kg, vg, dkg.view(), dvg.view());
  for (const auto* pair : {&dkg, &dvg}) {
    auto g = start_gather(pair == &dkg ? dk : dv, pair->view(), true, 0);
    finish_gather(g);
  }
}

template <class T>
void UlyssesAttention<T>::backward_chunks(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                                          const Mat<const T>& og, const Mat<const A>& lse, const Mat<const T>& qg,
                                          const Mat<const T>& kg, const Mat<const T>& vg, const Mat<T>& dkg_shared,
                                          const Mat<T>& dvg_shared) {
  const bool shared_kv = dkg_shared.data() != nullptr;
  // An inner strategy that cannot add into dK, dV gets a chunk's temporaries, summed here.
  const bool adds = shared_kv && inner_->accumulate_kv_grads(true);
  std::vector<Gather> home;  // the previous chunk's dQ (and dK, dV) on their way while this chunk attends
  for (int c = 0; c < N_; ++c) {
    auto d_og = group_buffer("ulysses_do", geometry_, false, false);
    scatter_heads(d_og.view(), d_o, false, c);
    auto dqg = group_buffer("ulysses_dq", geometry_, false, true);
    Tracked<Mat<T>> dkg, dvg;  // this chunk's (kv heads split among chunks), or temporaries
    if (!shared_kv)
      dkg = group_buffer("ulysses_dk", geometry_, true, true), dvg = group_buffer("ulysses_dv", geometry_, true, true);
    else if (!adds)
      dkg = group_buffer("ulysses_dk_chunk", geometry_, true, true), dvg = group_buffer("ulysses_dv_chunk", geometry_, true, true);
    const Mat<T> dkc = adds ? dkg_shared : dkg.view(), dvc = adds ? dvg_shared : dvg.view();
    inner_->backward(dqg.view(), dkc, dvc, d_og.view(), kept_chunk(og, false, c), stats_chunk(lse, c),
                     kept_chunk(qg, false, c), kept_chunk(kg, true, c), kept_chunk(vg, true, c));
    d_og.reset();
    if (shared_kv && !adds) {  // sum the temporaries in chunk order
      const auto sk = dkg_shared, sv = dvg_shared;
      const auto tk = dkg.view(), tv = dvg.view();
      Kokkos::parallel_for("ulysses_dkv_sum", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0},
                           {sk.extent(0), sk.extent(1)}),
          KOKKOS_LAMBDA(const int i, const int j) {
            sk(i, j) += tk(i, j);
            sv(i, j) += tv(i, j);
          });
      dkg.reset(), dvg.reset();
    }
    for (auto& g : home) finish_gather(g);
    home.clear();
    const auto send = [&](const Mat<T>& x, Tracked<Mat<T>> source, bool kv) {
      const Mat<const T> y = source.view();
      home.push_back(start_gather(x, y, kv, c, std::move(source)));
      if (c == N_ - 1) finish_gather(home.back());  // the last chunk: nothing left to overlap
    };
    send(dq, std::move(dqg), false);
    if (!shared_kv) send(dk, std::move(dkg), true), send(dv, std::move(dvg), true);
  }
  for (auto& g : home) finish_gather(g);
  if (adds) inner_->accumulate_kv_grads(false);
}

template class UlyssesAttention<float>;
template class UlyssesAttention<double>;
template class UlyssesAttention<bf16>;

}  // namespace minilst
