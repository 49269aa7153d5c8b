// Merging attention over two disjoint key sets (ring attention), per query row
// and head, in the accumulation type (>= fp32 whatever the storage type):
//   L = log(e^La + e^Lb),  O = e^(La-L) Oa + e^(Lb-L) Ob
// computed stably as  L' = La - logsigmoid(La - Lb),  O' = Oa - sigmoid(Lb - La) (Oa - Ob).
// A block with no visible key has Lb = -inf and changes nothing; a running
// state with La = -inf takes the block as it is.
//   O: [S, H*h] (running output, updated), L: [S, H] (running lse, updated)
//   Ob: [S, H*h], Lb: [S, H] (the block's, from attention_forward)
#pragma once

#include <limits>

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
void attention_merge(const Mat<accum_t<T>>& O, const Mat<accum_t<T>>& L, const Mat<const T>& Ob,
                     const Mat<const accum_t<T>>& Lb, int head_dim) {
  using A = accum_t<T>;
  const A neg_inf = -std::numeric_limits<A>::infinity();
  const int h = head_dim;
  Kokkos::parallel_for("attention_merge",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {L.extent(0), L.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int n) {
        const A lb = Lb(i, n), la = L(i, n);
        if (lb == neg_inf) return;
        if (la == neg_inf) {
          for (int c = 0; c < h; ++c) O(i, n * h + c) = A(Ob(i, n * h + c));
          L(i, n) = lb;
          return;
        }
        const A x = la - lb;  // logsigmoid(x) = min(x, 0) - log1p(exp(-|x|))
        const A ax = x < A(0) ? -x : x;
        const A e = compat::exp(-ax);
        L(i, n) = la - ((x < A(0) ? x : A(0)) - compat::log1p(e));
        const A w = x >= A(0) ? e / (A(1) + e) : A(1) / (A(1) + e);  // sigmoid(lb - la)
        for (int c = 0; c < h; ++c) {
          const A oa = O(i, n * h + c);
          O(i, n * h + c) = oa - w * (oa - A(Ob(i, n * h + c)));
        }
      });
}

}  // namespace minilst::kernels
