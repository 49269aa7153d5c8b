// The kernels of the seed paper's two-phase Ring Self-Attention (RSA; Li et al.,
// "Sequence Parallelism: Long Sequence Training from System Perspective"), kept as
// a reference variant for memory comparisons: the whole [Hl*Sq, S] score matrix of
// this rank's queries is built block by block as K blocks visit, soft-maxed, then
// applied to V blocks as they visit (flash attention exists to avoid exactly this).
//   Sq local queries, Hl local query heads, G kv heads of a block, group = Hl / G,
//   h head dim, S keys in all (the sum of the blocks); row n Sq + i of the score
//   matrix: head n, query i; block columns [c0, c0 + n_b); scale = 1 / sqrt(h).
// Forward:
//   rsa_scores   scores[n Sq + i][c0 + j] = scale q_i.k_j if k_pos_j <= q_pos_i else -inf   (=)
//   rsa_softmax  each row := softmax(row) = P in place; lse[i][n] = logsumexp(row) (-inf:
//                nothing visible) when lse is given (empty: the seed's backward keeps P instead)
//   rsa_pv       O[i][n h + c] += sum_j P[n Sq + i][c0 + j] v_j[(n / group) h + c]   (+=)
// Backward (the seed's, from P; every sum in the accumulation type A):
//   rsa_delta    delta[i][n] = sum_c dO[i][n h + c] O[i][n h + c]                    (=)
//   rsa_dv       dV[j][g h + c] = sum_{n: n / group = g} sum_i P[n Sq + i][c0 + j] dO[i][n h + c]   (=)
//   rsa_dscores  dS[n Sq + i][c0 + j] = P[n Sq + i][c0 + j] (dO_i^n . v_j^(n / group) - delta[i][n])  (=)
//   rsa_dq       dQ[i][n h + c] += scale sum_j dS[n Sq + i][c0 + j] k_j[(n / group) h + c]   (+=)
//   rsa_dk       dK[j][g h + c] = scale sum_{n: n / group = g} sum_i dS[n Sq + i][c0 + j] q_i[n h + c]   (=)
// (dV, dK: the rows j of one visiting block, or a slice of it, as the caller's views.)
#pragma once

#include <limits>

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
void rsa_scores(const Mat<accum_t<T>>& scores, std::int64_t c0, const Mat<const T>& q, const Mat<const T>& kb,
                const Vec<const std::int64_t>& q_pos, const Vec<const std::int64_t>& k_pos, int head_dim) {
  using A = accum_t<T>;
  const int h = head_dim, Sq = int(q.extent(0)), Hl = int(q.extent(1)) / h, group = int(q.extent(1) / kb.extent(1));
  const A scale = A(1) / compat::sqrt(A(h)), neg_inf = -std::numeric_limits<A>::infinity();
  Kokkos::parallel_for("rsa_scores", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0},
                       {std::size_t(Hl), std::size_t(Sq), kb.extent(0)}),
      KOKKOS_LAMBDA(const int n, const int i, const int j) {
        A s = 0;
        for (int c = 0; c < h; ++c) s += A(q(i, n * h + c)) * A(kb(j, (n / group) * h + c));
        scores(n * Sq + i, c0 + j) = k_pos(j) <= q_pos(i) ? scale * s : neg_inf;
      });
}

// lse: [Sq, Hl], or empty (0 x 0) when the caller keeps the probabilities themselves.
template <class T>
void rsa_softmax(const Mat<accum_t<T>>& scores, const Mat<accum_t<T>>& lse) {
  using A = accum_t<T>;
  const std::int64_t S = std::int64_t(scores.extent(1)), Sq = std::int64_t(lse.extent(0));
  const bool keep_lse = Sq > 0;
  const A neg_inf = -std::numeric_limits<A>::infinity();
  Kokkos::parallel_for("rsa_softmax", Kokkos::RangePolicy<ExecSpace>(0, scores.extent(0)), KOKKOS_LAMBDA(const int r) {
    A m = neg_inf;
    for (std::int64_t j = 0; j < S; ++j) m = scores(r, j) > m ? scores(r, j) : m;
    A sum = 0;
    if (m != neg_inf)
      for (std::int64_t j = 0; j < S; ++j) sum += compat::exp(scores(r, j) - m);
    const A l = m == neg_inf ? neg_inf : m + compat::log(sum);
    for (std::int64_t j = 0; j < S; ++j) scores(r, j) = l == neg_inf ? A(0) : compat::exp(scores(r, j) - l);
    if (keep_lse) lse(r % Sq, r / Sq) = l;
  });
}

template <class T>
void rsa_pv(const Mat<accum_t<T>>& O, const Mat<const accum_t<T>>& scores, std::int64_t c0, const Mat<const T>& vb,
            int head_dim) {
  using A = accum_t<T>;
  const int h = head_dim, Sq = int(O.extent(0)), group = int(O.extent(1) / vb.extent(1));
  const std::int64_t nb = std::int64_t(vb.extent(0));
  Kokkos::parallel_for("rsa_pv", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {O.extent(0), O.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int col) {
        const int n = col / h, c = col % h;
        A acc = 0;
        for (std::int64_t j = 0; j < nb; ++j) acc += scores(n * Sq + i, c0 + j) * A(vb(j, (n / group) * h + c));
        O(i, col) += acc;
      });
}

// delta: [Sq, Hl]; d_o, o: [Sq, Hl h].
template <class T>
void rsa_delta(const Mat<accum_t<T>>& delta, const Mat<const T>& d_o, const Mat<const T>& o, int head_dim) {
  using A = accum_t<T>;
  const int h = head_dim;
  Kokkos::parallel_for("rsa_delta", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0},
                       {delta.extent(0), delta.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int n) {
        A acc = 0;
        for (int c = 0; c < h; ++c) acc += A(d_o(i, n * h + c)) * A(o(i, n * h + c));
        delta(i, n) = acc;
      });
}

// dv: [n, G h], the block's rows j = 0..n-1 at probability columns c0 + j; p: [Hl Sq, S]; d_o: [Sq, Hl h].
template <class T>
void rsa_dv(const Mat<accum_t<T>>& dv, const Mat<const accum_t<T>>& p, std::int64_t c0, const Mat<const T>& d_o,
            int head_dim) {
  using A = accum_t<T>;
  const int h = head_dim, Sq = int(d_o.extent(0)), group = int(d_o.extent(1) / dv.extent(1));
  Kokkos::parallel_for("rsa_dv", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {dv.extent(0), dv.extent(1)}),
      KOKKOS_LAMBDA(const int j, const int col) {
        const int g = col / h, c = col % h;
        A acc = 0;
        for (int n = g * group; n < (g + 1) * group; ++n)
          for (int i = 0; i < Sq; ++i) acc += p(n * Sq + i, c0 + j) * A(d_o(i, n * h + c));
        dv(j, col) = acc;
      });
}

// ds, p: [Hl Sq, S], columns [c0, c0 + n) written; d_o: [Sq, Hl h]; vb: [n, G h]; delta: [Sq, Hl].
template <class T>
void rsa_dscores(const Mat<accum_t<T>>& ds, const Mat<const accum_t<T>>& p, std::int64_t c0, const Mat<const T>& d_o,
                 const Mat<const T>& vb, const Mat<const accum_t<T>>& delta, int head_dim) {
  using A = accum_t<T>;
  const int h = head_dim, Sq = int(d_o.extent(0)), Hl = int(d_o.extent(1)) / h, group = int(d_o.extent(1) / vb.extent(1));
  Kokkos::parallel_for("rsa_dscores", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0},
                       {std::size_t(Hl), std::size_t(Sq), vb.extent(0)}),
      KOKKOS_LAMBDA(const int n, const int i, const int j) {
        const auto r = n * Sq + i;
        const A pij = p(r, c0 + j);
        A dp = 0;  // dP_ij = dO_i . v_j (a masked key, P = 0, needs none)
        if (pij != A(0))
          for (int c = 0; c < h; ++c) dp += A(d_o(i, n * h + c)) * A(vb(j, (n / group) * h + c));
        ds(r, c0 + j) = pij == A(0) ? A(0) : pij * (dp - delta(i, n));
      });
}

// dq: [Sq, Hl h] (+=); ds: [Hl Sq, S]; kb: [n, G h] at columns [c0, c0 + n).
template <class T>
void rsa_dq(const Mat<accum_t<T>>& dq, const Mat<const accum_t<T>>& ds, std::int64_t c0, const Mat<const T>& kb,
            int head_dim) {
  using A = accum_t<T>;
  const int h = head_dim, Sq = int(dq.extent(0)), group = int(dq.extent(1) / kb.extent(1));
  const std::int64_t nb = std::int64_t(kb.extent(0));
  const A scale = A(1) / compat::sqrt(A(h));
  Kokkos::parallel_for("rsa_dq", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {dq.extent(0), dq.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int col) {
        const int n = col / h, c = col % h;
        A acc = 0;
        for (std::int64_t j = 0; j < nb; ++j) acc += ds(n * Sq + i, c0 + j) * A(kb(j, (n / group) * h + c));
        dq(i, col) += scale * acc;
      });
}

// dk: [n, G h], the block's rows at columns c0 + j; ds: [Hl Sq, S]; q: [Sq, Hl h].
template <class T>
void rsa_dk(const Mat<accum_t<T>>& dk, const Mat<const accum_t<T>>& ds, std::int64_t c0, const Mat<const T>& q,
            int head_dim) {
  using A = accum_t<T>;
  const int h = head_dim, Sq = int(q.extent(0)), group = int(q.extent(1) / dk.extent(1));
  const A scale = A(1) / compat::sqrt(A(h));
  Kokkos::parallel_for("rsa_dk", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {dk.extent(0), dk.extent(1)}),
      KOKKOS_LAMBDA(const int j, const int col) {
        const int g = col / h, c = col % h;
        A acc = 0;
        for (int n = g * group; n < (g + 1) * group; ++n)
          for (int i = 0; i < Sq; ++i) acc += ds(n * Sq + i, c0 + j) * A(q(i, n * h + c));
        dk(j, col) = scale * acc;
      });
}

}  // namespace minilst::kernels
