// Token embedding.  S tokens, V vocab, d hidden.
//   forward   x[i, :] = E[tok[i], :]               x: [S, d] (=)
//   backward  dE[tok[i], :] += dx[i, :]             dE: [V, d] (+=)
// The backward is parallel over the d columns and serial over tokens, so a
// token that appears twice is summed in a fixed order: deterministic, no atomics.
#pragma once

#include "types.hpp"

namespace minilst::kernels {

template <class T>
void embedding_forward(const Mat<T>& x, const Vec<const std::int64_t>& tokens, const Mat<const T>& E) {
  Kokkos::parallel_for("embedding_forward",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {x.extent(0), x.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int j) { x(i, j) = E(tokens(i), j); });
}

template <class T>
void embedding_backward(const Mat<T>& dE, const Vec<const std::int64_t>& tokens, const Mat<const T>& dx) {
  const int S = static_cast<int>(dx.extent(0));
  Kokkos::parallel_for("embedding_backward", Kokkos::RangePolicy<ExecSpace>(0, dx.extent(1)),
      KOKKOS_LAMBDA(const int j) {
        for (int i = 0; i < S; ++i) dE(tokens(i), j) += dx(i, j);
      });
}

}  // namespace minilst::kernels
