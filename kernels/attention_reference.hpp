// Plain reference of attention.hpp: masked multi-head attention as the obvious loops,
// no tiles, no online softmax, no vectorised exp; selected at run time in place of
// attention_forward / attention_backward, and validated against them in
// tests/kernels/test_attention.cpp (Attention.Reference*). Same signatures, same semantics.
//   Sq query tokens, Sk key tokens, Hq query heads, Gk kv heads, h head dim.
//   q: [Sq, Hq*h]  k, v: [Sk, Gk*h]  o: [Sq, Hq*h]  lse: [Sq, Hq]  (accum type)
//   q_pos, q_lo: [Sq], k_pos: [Sk] global positions; key j is visible to query i iff
//   q_lo[i] <= k_pos[j] <= q_pos[i] (q_lo empty: 0 for every query, causal).
//   Query head n reads kv head n / (Hq/Gk) (GQA).
//   s_ij = q_i.k_j / sqrt(h) (visible keys only), recomputed where needed: no [Sq, Sk] matrix.
//
// forward (=):  o_i = sum_j e^(s_ij - lse_i) v_j,  lse_i = log sum_j e^(s_ij)
//               a row with no visible key gets o_i = 0, lse_i = -inf.
//   one work item per (query row i, head n): pass 1 m = max_j s_ij, pass 2
//   l = sum_j e^(s_ij - m) and o_i = sum_j e^(s_ij - m) v_j / l.
// backward (+=, with the o and lse of the whole attention, so blocks simply add up):
//   D_i = rowsum(dO_i * O_i) (into the delta workspace, =);  P_ij = e^(s_ij - lse_i)
//   dS_ij = P_ij (dO_i.v_j - D_i)
//   dQ_i += sum_j dS_ij k_j / sqrt(h)               a work item per (query row, head)
//   dK_j += sum_i dS_ij q_i / sqrt(h),  dV_j += sum_i P_ij dO_i
//                                                   a work item per (key row, kv head),
//                                                   summing over the heads of its group
//   a row with lse = -inf adds nothing. Every output element has one writer and a
//   fixed summation order (keys, then heads and queries, ascending): deterministic.
// Sums run in the accumulation type, in [S, *] workspaces of it; each output element
// is rounded to T once (o) or has one rounded term added (dq, dk, dv).
#pragma once

#include <limits>

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

namespace detail {
// Whether key position kp is visible to query i (position qp): q_lo(i) <= kp <= qp.
KOKKOS_INLINE_FUNCTION bool reference_visible(std::int64_t kp, std::int64_t qp, const Vec<const std::int64_t>& q_lo,
                                              int i) {
  return kp <= qp && (q_lo.extent(0) == 0 || kp >= q_lo(i));
}
}  // namespace detail

template <class T>
void attention_forward_reference(const Mat<T>& o, const Mat<accum_t<T>>& lse, const Mat<const T>& q,
                                 const Mat<const T>& k, const Mat<const T>& v,
                                 const Vec<const std::int64_t>& q_pos, const Vec<const std::int64_t>& q_lo,
                                 const Vec<const std::int64_t>& k_pos, int head_dim) {
  using A = accum_t<T>;
  const int Sq = int(q.extent(0)), Sk = int(k.extent(0));
  const int Hq = int(q.extent(1)) / head_dim, Gk = int(k.extent(1)) / head_dim;
  if (Sq == 0) return;
  const int h = head_dim, group = Hq / Gk;
  const A scale = A(1) / compat::sqrt(A(h));
  const A neg_inf = -std::numeric_limits<A>::infinity();
  Mat<A> acc("acc", Sq, std::size_t(Hq) * h);  // [Sq, Hq*h] sum_j e^(s_ij - m) v_j

  Kokkos::parallel_for("attention_forward_reference",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {std::size_t(Sq), std::size_t(Hq)}),
      KOKKOS_LAMBDA(const int i, const int n) {
        const int qo = n * h, ko = (n / group) * h;
        const std::int64_t qp = q_pos(i);
        A m = neg_inf;  // pass 1: the row max over the visible keys
        for (int j = 0; j < Sk; ++j) {
          if (!detail::reference_visible(k_pos(j), qp, q_lo, i)) continue;
          A s = 0;
          for (int c = 0; c < h; ++c) s += A(q(i, qo + c)) * A(k(j, ko + c));
          s *= scale;
          m = s > m ? s : m;
        }
        if (m == neg_inf) {  // no visible key
          for (int c = 0; c < h; ++c) o(i, qo + c) = T(0);
          lse(i, n) = neg_inf;
          return;
        }
        A l = 0;  // pass 2: the softmax sum and the unnormalised output
        for (int j = 0; j < Sk; ++j) {
          if (!detail::reference_visible(k_pos(j), qp, q_lo, i)) continue;
          A s = 0;
          for (int c = 0; c < h; ++c) s += A(q(i, qo + c)) * A(k(j, ko + c));
          const A e = compat::exp(scale * s - m);
          l += e;
          for (int c = 0; c < h; ++c) acc(i, qo + c) += e * A(v(j, ko + c));
        }
        for (int c = 0; c < h; ++c) o(i, qo + c) = T(acc(i, qo + c) / l);
        lse(i, n) = m + compat::log(l);
      });
}

template <class T>
void attention_backward_reference(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv,
                                  const Mat<accum_t<T>>& delta, const Mat<const T>& d_o,
                                  const Mat<const T>& o, const Mat<const accum_t<T>>& lse,
                                  const Mat<const T>& q, const Mat<const T>& k, const Mat<const T>& v,
                                  const Vec<const std::int64_t>& q_pos, const Vec<const std::int64_t>& q_lo,
                                  const Vec<const std::int64_t>& k_pos, int head_dim) {
  // delta: [Sq, Hq] workspace, overwritten with D_i.
  using A = accum_t<T>;
  const int Sq = int(q.extent(0)), Sk = int(k.extent(0));
  const int Hq = int(q.extent(1)) / head_dim, Gk = int(k.extent(1)) / head_dim;
  if (Sq == 0 || Sk == 0) return;
  const int h = head_dim, group = Hq / Gk;
  const A scale = A(1) / compat::sqrt(A(h));
  const A neg_inf = -std::numeric_limits<A>::infinity();

  Kokkos::parallel_for("attention_backward_reference_delta",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {std::size_t(Sq), std::size_t(Hq)}),
      KOKKOS_LAMBDA(const int i, const int n) {
        A s = 0;
        for (int c = 0; c < h; ++c) s += A(d_o(i, n * h + c)) * A(o(i, n * h + c));
        delta(i, n) = s;
      });

  // dQ_i: one work item per (query row i, head n), the keys in order.
  Mat<A> dq_acc("dq_acc", Sq, std::size_t(Hq) * h);  // [Sq, Hq*h] sum_j dS_ij k_j
  Kokkos::parallel_for("attention_backward_reference_dq",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {std::size_t(Sq), std::size_t(Hq)}),
      KOKKOS_LAMBDA(const int i, const int n) {
        const int qo = n * h, ko = (n / group) * h;
        const A l = lse(i, n), D = delta(i, n);
        if (l == neg_inf) return;  // no visible key: no gradient
        const std::int64_t qp = q_pos(i);
        for (int j = 0; j < Sk; ++j) {
          if (!detail::reference_visible(k_pos(j), qp, q_lo, i)) continue;
          A s = 0, dp = 0;
          for (int c = 0; c < h; ++c) {
            s += A(q(i, qo + c)) * A(k(j, ko + c));
            dp += A(d_o(i, qo + c)) * A(v(j, ko + c));
          }
          const A p = compat::exp(scale * s - l);
          const A ds = p * (dp - D);
          for (int c = 0; c < h; ++c) dq_acc(i, qo + c) += ds * A(k(j, ko + c));
        }
        for (int c = 0; c < h; ++c) dq(i, qo + c) += scale * dq_acc(i, qo + c);
      });

  // dK_j, dV_j: one work item per (key row j, kv head g), the group's heads then the queries in order.
  Mat<A> dk_acc("dk_acc", Sk, std::size_t(Gk) * h), dv_acc("dv_acc", Sk, std::size_t(Gk) * h);  // [Sk, Gk*h]
  Kokkos::parallel_for("attention_backward_reference_dkv",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {std::size_t(Sk), std::size_t(Gk)}),
      KOKKOS_LAMBDA(const int j, const int g) {
        const int ko = g * h;
        const std::int64_t kp = k_pos(j);
        for (int n = g * group; n < (g + 1) * group; ++n) {
          const int qo = n * h;
          for (int i = 0; i < Sq; ++i) {
            const A l = lse(i, n);
            if (!detail::reference_visible(kp, q_pos(i), q_lo, i) || l == neg_inf) continue;
            A s = 0, dp = 0;
            for (int c = 0; c < h; ++c) {
              s += A(q(i, qo + c)) * A(k(j, ko + c));
              dp += A(d_o(i, qo + c)) * A(v(j, ko + c));
            }
            const A p = compat::exp(scale * s - l);
            const A ds = p * (dp - delta(i, n));
            for (int c = 0; c < h; ++c) {
              dk_acc(j, ko + c) += ds * A(q(i, qo + c));
              dv_acc(j, ko + c) += p * A(d_o(i, qo + c));
            }
          }
        }
        for (int c = 0; c < h; ++c) {
          dk(j, ko + c) += scale * dk_acc(j, ko + c);
          dv(j, ko + c) += dv_acc(j, ko + c);
        }
      });
}

}  // namespace minilst::kernels
