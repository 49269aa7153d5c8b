// The kernels of the seed paper's two-phase Ring Self-Attention (RSA), kept as a
// reference variant for memory comparisons: the whole [Hl*Sq, S] score matrix of
// this rank's queries is built block by block as K blocks visit, soft-maxed, then
// applied to V blocks as they visit (flash attention exists to avoid exactly this).
//   Sq local queries, Hl local query heads, G kv heads of a block, h head dim,
//   S keys in all (the sum of the blocks); scores row n Sq + i: head n, query i.
//   rsa_scores   scores[n Sq + i][c0 + j] = q_i.k_j / sqrt(h) if k_pos_j <= q_pos_i else -inf   (=)
//   rsa_softmax  each row := softmax(row) in place; lse[i][n] = logsumexp(row) (-inf: nothing visible)
//   rsa_pv       O[i][n h + c] += sum_j scores[n Sq + i][c0 + j] v_j[(n / group) h + c]   (+=)
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

template <class T>
void rsa_softmax(const Mat<accum_t<T>>& scores, const Mat<accum_t<T>>& lse) {
  using A = accum_t<T>;
  const int Sq = int(lse.extent(0)), Hl = int(lse.extent(1));
  const std::int64_t S = std::int64_t(scores.extent(1));
  const A neg_inf = -std::numeric_limits<A>::infinity();
  Kokkos::parallel_for("rsa_softmax", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0},
                       {std::size_t(Hl), std::size_t(Sq)}),
      KOKKOS_LAMBDA(const int n, const int i) {
        const auto r = n * Sq + i;
        A m = neg_inf;
        for (std::int64_t j = 0; j < S; ++j) m = scores(r, j) > m ? scores(r, j) : m;
        A sum = 0;
        if (m != neg_inf)
          for (std::int64_t j = 0; j < S; ++j) sum += compat::exp(scores(r, j) - m);
        const A l = m == neg_inf ? neg_inf : m + compat::log(sum);
        for (std::int64_t j = 0; j < S; ++j) scores(r, j) = l == neg_inf ? A(0) : compat::exp(scores(r, j) - l);
        lse(i, n) = l;
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

}  // namespace minilst::kernels
