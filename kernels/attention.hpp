// Causal multi-head attention, flash style: tiles of keys, a running max and
// log-sum-exp per query row, never an [Sq, Sk] score matrix.
//   Sq query tokens, Sk key tokens, Hq query heads, Gk kv heads, h head dim.
//   q: [Sq, Hq*h]  k, v: [Sk, Gk*h]  o: [Sq, Hq*h]  lse: [Sq, Hq]  (accum type)
//   q_pos: [Sq], k_pos: [Sk] global positions; key j is visible to query i iff
//   k_pos[j] <= q_pos[i], so any sequence layout (contiguous, zigzag, a visiting
//   ring block) is masked correctly. Query head n reads kv head n / (Hq/Gk) (GQA).
//
// forward (=):  o_i = sum_j softmax_j(q_i.k_j / sqrt(h)) v_j,  lse_i = log sum_j e^(q_i.k_j/sqrt(h))
//               a row with no visible key gets o_i = 0, lse_i = -inf (a ring block may be all masked).
// backward (+=, with the o and lse of the *whole* attention, so blocks simply add up):
//   D_i = rowsum(dO_i * O_i);  P_ij = exp(q_i.k_j/sqrt(h) - lse_i)
//   dV_j += sum_i P_ij dO_i ;  dS_ij = P_ij (dO_i.v_j - D_i)
//   dQ_i += sum_j dS_ij k_j / sqrt(h) ;  dK_j += sum_i dS_ij q_i / sqrt(h)
// The backward runs two passes (dQ over query rows, dK/dV over key rows, summing
// the q heads of a GQA group), so every output element has one writer: no atomics,
// deterministic. Both passes recompute P.
#pragma once

#include <limits>

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

namespace detail {
constexpr int kAttnTileRows = 32;  // query rows (forward, dQ) or key rows (dK/dV) per team
constexpr int kAttnTileKeys = 64;  // keys scored before each online-softmax update

using TeamMember = Kokkos::TeamPolicy<ExecSpace>::member_type;
template <class A>
using ScratchVec = Kokkos::View<A*, ExecSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;

template <class A, class XV, class YV>
KOKKOS_INLINE_FUNCTION A dot_rows(const XV& x, int i, int xoff, const YV& y, int j, int yoff, int h) {
  const auto* xr = &x(i, xoff);  // rows are contiguous (LayoutRight)
  const auto* yr = &y(j, yoff);
  A s = 0;
#ifdef MINILST_HOST_SIMD  // -fopenmp-simd: vectorize the reduction, no OpenMP runtime
#pragma omp simd reduction(+ : s)
#endif
  for (int c = 0; c < h; ++c) s += A(xr[c]) * A(yr[c]);
  return s;
}

// y[c] += a x[c], c < h  (x: a contiguous row of a LayoutRight matrix)
template <class A, class T>
KOKKOS_INLINE_FUNCTION void axpy_row(A a, const T* x, A* y, int h) {
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
  for (int c = 0; c < h; ++c) y[c] += a * A(x[c]);
}

inline int tiles(int n) { return (n + kAttnTileRows - 1) / kAttnTileRows; }
}  // namespace detail

template <class T>
void attention_forward(const Mat<T>& o, const Mat<accum_t<T>>& lse, const Mat<const T>& q,
                       const Mat<const T>& k, const Mat<const T>& v,
                       const Vec<const std::int64_t>& q_pos, const Vec<const std::int64_t>& k_pos,
                       int head_dim) {
  using A = accum_t<T>;
  using namespace detail;
  const int h = head_dim, Sq = int(q.extent(0)), Sk = int(k.extent(0));
  const int Hq = int(q.extent(1)) / h, group = Hq / (int(k.extent(1)) / h);
  const A scale = A(1) / compat::sqrt(A(h));
  const A neg_inf = -std::numeric_limits<A>::infinity();

  Kokkos::TeamPolicy<ExecSpace> policy(Hq * tiles(Sq), Kokkos::AUTO);
  policy.set_scratch_size(0, Kokkos::PerThread(ScratchVec<A>::shmem_size(kAttnTileKeys) +
                                               ScratchVec<A>::shmem_size(h)));
  Kokkos::parallel_for("attention_forward", policy, KOKKOS_LAMBDA(const TeamMember& team) {
    const int n = team.league_rank() % Hq, tile = team.league_rank() / Hq;
    const int qo = n * h, ko = (n / group) * h;
    const int i0 = tile * kAttnTileRows, i1 = i0 + kAttnTileRows < Sq ? i0 + kAttnTileRows : Sq;
    ScratchVec<A> s(team.thread_scratch(0), kAttnTileKeys);
    ScratchVec<A> acc(team.thread_scratch(0), h);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, i0, i1), [&](const int i) {
      const auto pi = q_pos(i);
      A m = neg_inf, l = 0;
      for (int c = 0; c < h; ++c) acc(c) = 0;
      for (int j0 = 0; j0 < Sk; j0 += kAttnTileKeys) {
        const int nj = j0 + kAttnTileKeys < Sk ? kAttnTileKeys : Sk - j0;
        A tile_max = neg_inf;
        for (int t = 0; t < nj; ++t) {
          const int j = j0 + t;
          s(t) = k_pos(j) <= pi ? scale * dot_rows<A>(q, i, qo, k, j, ko, h) : neg_inf;
          tile_max = s(t) > tile_max ? s(t) : tile_max;
        }
        if (tile_max == neg_inf) continue;  // the whole key tile is masked for this row
        const A m_new = m > tile_max ? m : tile_max;
        const A correction = compat::exp(m - m_new);  // 0 on the first visible tile
        l *= correction;
        for (int c = 0; c < h; ++c) acc(c) *= correction;
        for (int t = 0; t < nj; ++t) {
          if (s(t) == neg_inf) continue;
          const A p = compat::exp(s(t) - m_new);
          l += p;
          axpy_row(p, &v(j0 + t, ko), acc.data(), h);
        }
        m = m_new;
      }
      const A inv_l = l > A(0) ? A(1) / l : A(0);
      for (int c = 0; c < h; ++c) o(i, qo + c) = T(acc(c) * inv_l);
      lse(i, n) = l > A(0) ? m + compat::log(l) : neg_inf;
    });
  });
}

template <class T>
void attention_backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv,
                        const Mat<accum_t<T>>& delta, const Mat<const T>& d_o,
                        const Mat<const T>& o, const Mat<const accum_t<T>>& lse,
                        const Mat<const T>& q, const Mat<const T>& k, const Mat<const T>& v,
                        const Vec<const std::int64_t>& q_pos, const Vec<const std::int64_t>& k_pos,
                        int head_dim) {
  // delta: [Sq, Hq] workspace, overwritten with D_i.
  using A = accum_t<T>;
  using namespace detail;
  const int h = head_dim, Sq = int(q.extent(0)), Sk = int(k.extent(0));
  const int Hq = int(q.extent(1)) / h, Gk = int(k.extent(1)) / h, group = Hq / Gk;
  const A scale = A(1) / compat::sqrt(A(h));
  const A neg_inf = -std::numeric_limits<A>::infinity();

  Kokkos::parallel_for("attention_backward_delta",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {std::size_t(Sq), std::size_t(Hq)}),
      KOKKOS_LAMBDA(const int i, const int n) { delta(i, n) = dot_rows<A>(d_o, i, n * h, o, i, n * h, h); });

  // Pass 1: dQ, one query row per thread.
  Kokkos::TeamPolicy<ExecSpace> q_policy(Hq * tiles(Sq), Kokkos::AUTO);
  q_policy.set_scratch_size(0, Kokkos::PerThread(ScratchVec<A>::shmem_size(h)));
  Kokkos::parallel_for("attention_backward_dq", q_policy, KOKKOS_LAMBDA(const TeamMember& team) {
    const int n = team.league_rank() % Hq, tile = team.league_rank() / Hq;
    const int qo = n * h, ko = (n / group) * h;
    const int i0 = tile * kAttnTileRows, i1 = i0 + kAttnTileRows < Sq ? i0 + kAttnTileRows : Sq;
    ScratchVec<A> acc(team.thread_scratch(0), h);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, i0, i1), [&](const int i) {
      const A lse_i = lse(i, n);
      if (lse_i == neg_inf) return;  // no visible key anywhere: no gradient
      for (int c = 0; c < h; ++c) acc(c) = 0;
      const auto pi = q_pos(i);
      for (int j = 0; j < Sk; ++j) {
        if (k_pos(j) > pi) continue;
        const A p = compat::exp(scale * dot_rows<A>(q, i, qo, k, j, ko, h) - lse_i);
        const A ds = p * (dot_rows<A>(d_o, i, qo, v, j, ko, h) - delta(i, n));
        axpy_row(ds, &k(j, ko), acc.data(), h);
      }
      for (int c = 0; c < h; ++c) dq(i, qo + c) += T(scale * acc(c));
    });
  });

  // Pass 2: dK and dV, one key row per thread, summing the group's q heads.
  Kokkos::TeamPolicy<ExecSpace> k_policy(Gk * tiles(Sk), Kokkos::AUTO);
  k_policy.set_scratch_size(0, Kokkos::PerThread(2 * ScratchVec<A>::shmem_size(h)));
  Kokkos::parallel_for("attention_backward_dkdv", k_policy, KOKKOS_LAMBDA(const TeamMember& team) {
    const int g = team.league_rank() % Gk, tile = team.league_rank() / Gk;
    const int ko = g * h;
    const int j0 = tile * kAttnTileRows, j1 = j0 + kAttnTileRows < Sk ? j0 + kAttnTileRows : Sk;
    ScratchVec<A> dk_acc(team.thread_scratch(0), h);
    ScratchVec<A> dv_acc(team.thread_scratch(0), h);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, j0, j1), [&](const int j) {
      for (int c = 0; c < h; ++c) dk_acc(c) = dv_acc(c) = 0;
      const auto pj = k_pos(j);
      for (int n = g * group; n < (g + 1) * group; ++n) {
        const int qo = n * h;
        for (int i = 0; i < Sq; ++i) {
          const A lse_i = lse(i, n);
          if (q_pos(i) < pj || lse_i == neg_inf) continue;
          const A p = compat::exp(scale * dot_rows<A>(q, i, qo, k, j, ko, h) - lse_i);
          const A ds = p * (dot_rows<A>(d_o, i, qo, v, j, ko, h) - delta(i, n));
          axpy_row(p, &d_o(i, qo), dv_acc.data(), h);
          axpy_row(ds, &q(i, qo), dk_acc.data(), h);
        }
      }
      for (int c = 0; c < h; ++c) {
        dk(j, ko + c) += T(scale * dk_acc(c));
        dv(j, ko + c) += T(dv_acc(c));
      }
    });
  });
}

}  // namespace minilst::kernels
