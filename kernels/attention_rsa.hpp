// The kernels of the seed paper's two-phase Ring Self-Attention (RSA; Li et al.,
// "Sequence Parallelism: Long Sequence Training from System Perspective"), kept as
// a reference variant for memory comparisons: the whole [Hl*Sq, S] score matrix of
// this rank's queries is built block by block as K blocks visit, soft-maxed, then
// applied to V blocks as they visit (flash attention exists to avoid exactly this).
//   Sq local queries, Hl local query heads, G kv heads of a block, group = Hl / G,
//   h head dim, S keys in all (the sum of the blocks); row n Sq + i of the score
//   matrix: head n, query i; block columns [c0, c0 + n_b); scale = 1 / sqrt(h).
// Forward:
//   rsa_scores   scores[n Sq + i][c0 + j] = scale q_i.k_j if q_lo_i <= k_pos_j <= q_pos_i else -inf   (=)
//                (q_lo: [Sq] first visible positions, or empty: 0 for every query, causal)
//   rsa_softmax  each row := softmax(row) = P in place; lse[i][n] = logsumexp(row) (-inf:
//                nothing visible) when lse is given (empty: the seed's backward keeps P instead)
//   rsa_pv       O[i][n h + c] += sum_j P[n Sq + i][c0 + j] v_j[(n / group) h + c]   (+=)
// Backward (the seed's, from P; every sum in the accumulation type A):
//   rsa_delta    delta[i][n] = sum_c dO[i][n h + c] O[i][n h + c]                    (=)
//   rsa_dv       dV[j][g h + c] = sum_{n: n / group = g} sum_i P[n Sq + i][c0 + j] dO[i][n h + c]   (=)
//   rsa_dscores  dS[n Sq + i][c0 + j] = P[n Sq + i][c0 + j] (dO_i^n . v_j^(n / group) - delta[i][n])  (=)
//   rsa_dq       dQ[i][n h + c] += scale sum_j dS[n Sq + i][c0 + j] k_j[(n / group) h + c]   (+=)
//   rsa_dk       dK[j][g h + c] = scale sum_{n: n / group = g} sum_i dS[n Sq + i][c0 + j] q_i[n h + c]   (=)
// (dV, dK: the rows j of one visiting block, or a slice of it, as the caller's views.) rsa_pv and
// rsa_dq are one product, rsa_times_block; rsa_dv and rsa_dk the other, rsa_block_times.
#pragma once

#include <limits>

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
void rsa_scores(const Mat<accum_t<T>>& scores, std::int64_t c0, const Mat<const T>& q, const Mat<const T>& kb,
                const Vec<const std::int64_t>& q_pos, const Vec<const std::int64_t>& q_lo,
                const Vec<const std::int64_t>& k_pos, int head_dim) {
  using A = accum_t<T>;
  const int h = head_dim, Sq = int(q.extent(0)), Hl = int(q.extent(1)) / h, group = int(q.extent(1) / kb.extent(1));
  const A scale = A(1) / compat::sqrt(A(h)), neg_inf = -std::numeric_limits<A>::infinity();
  const bool has_lo = q_lo.extent(0) > 0;
  Kokkos::parallel_for("rsa_scores", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0},
                       {std::size_t(Hl), std::size_t(Sq), kb.extent(0)}),
      KOKKOS_LAMBDA(const int n, const int i, const int j) {
        A s = 0;
        for (int c = 0; c < h; ++c) s += A(q(i, n * h + c)) * A(kb(j, (n / group) * h + c));
        const bool visible = k_pos(j) <= q_pos(i) && (!has_lo || k_pos(j) >= q_lo(i));
        scores(n * Sq + i, c0 + j) = visible ? scale * s : neg_inf;
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

// The two products over a block's probability (or score-gradient) columns [c0, c0 + n)
// of w [Hl Sq, S], every query head n reading kv head n / group:
//   rsa_times_block  out[i][n h + c] += scale sum_j w[n Sq + i][c0 + j] x[j][(n / group) h + c]   out: [Sq, Hl h], x: [n, G h]
//   rsa_block_times  out[j][g h + c]  = scale sum_{n of g, i} w[n Sq + i][c0 + j] x[i][n h + c]   out: [n, G h], x: [Sq, Hl h]
template <class T>
void rsa_times_block(const Mat<accum_t<T>>& out, const Mat<const accum_t<T>>& w, std::int64_t c0, const Mat<const T>& x,
                     int head_dim, accum_t<T> scale) {
  using A = accum_t<T>;
  const int h = head_dim, Sq = int(out.extent(0)), group = int(out.extent(1) / x.extent(1));
  const std::int64_t nb = std::int64_t(x.extent(0));
  Kokkos::parallel_for("rsa_times_block", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0},
                       {out.extent(0), out.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int col) {
        const int n = col / h, c = col % h;
        A acc = 0;
        for (std::int64_t j = 0; j < nb; ++j) acc += w(n * Sq + i, c0 + j) * A(x(j, (n / group) * h + c));
        out(i, col) += scale * acc;
      });
}

template <class T>
void rsa_block_times(const Mat<accum_t<T>>& out, const Mat<const accum_t<T>>& w, std::int64_t c0, const Mat<const T>& x,
                     int head_dim, accum_t<T> scale) {
  using A = accum_t<T>;
  const int h = head_dim, Sq = int(x.extent(0)), group = int(x.extent(1) / out.extent(1));
  Kokkos::parallel_for("rsa_block_times", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0},
                       {out.extent(0), out.extent(1)}),
      KOKKOS_LAMBDA(const int j, const int col) {
        const int g = col / h, c = col % h;
        A acc = 0;
        for (int n = g * group; n < (g + 1) * group; ++n)
          for (int i = 0; i < Sq; ++i) acc += w(n * Sq + i, c0 + j) * A(x(i, n * h + c));
        out(j, col) = scale * acc;
      });
}

// O [Sq, Hl h] += P_block V_block (the forward's phase 2).
template <class T>
void rsa_pv(const Mat<accum_t<T>>& O, const Mat<const accum_t<T>>& scores, std::int64_t c0, const Mat<const T>& vb,
            int head_dim) {
  rsa_times_block<T>(O, scores, c0, vb, head_dim, accum_t<T>(1));
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

// dv: [n, G h] (=), the block's rows at probability columns c0 + j: P_block^T dO; d_o: [Sq, Hl h].
template <class T>
void rsa_dv(const Mat<accum_t<T>>& dv, const Mat<const accum_t<T>>& p, std::int64_t c0, const Mat<const T>& d_o,
            int head_dim) {
  rsa_block_times<T>(dv, p, c0, d_o, head_dim, accum_t<T>(1));
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

// dq: [Sq, Hl h] (+=) dS_block K_block / sqrt(h); kb: [n, G h] at columns [c0, c0 + n).
template <class T>
void rsa_dq(const Mat<accum_t<T>>& dq, const Mat<const accum_t<T>>& ds, std::int64_t c0, const Mat<const T>& kb,
            int head_dim) {
  rsa_times_block<T>(dq, ds, c0, kb, head_dim, accum_t<T>(1) / compat::sqrt(accum_t<T>(head_dim)));
}

// dk: [n, G h] (=) dS_block^T Q / sqrt(h), the block's rows at columns c0 + j; q: [Sq, Hl h].
template <class T>
void rsa_dk(const Mat<accum_t<T>>& dk, const Mat<const accum_t<T>>& ds, std::int64_t c0, const Mat<const T>& q,
            int head_dim) {
  rsa_block_times<T>(dk, ds, c0, q, head_dim, accum_t<T>(1) / compat::sqrt(accum_t<T>(head_dim)));
}

}  // namespace minilst::kernels
