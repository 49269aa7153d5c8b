// Token embedding.  S tokens, V vocab, d hidden.
//   forward   x[i, :] = E[tok[i], :]               x: [S, d] (=)
//   backward  dE[tok[i], :] += dx[i, :]             dE: [V, d] (+=, master_t: fp32 under bf16)
// Vocabulary-parallel (tensor parallelism): E holds the rows of tokens [v0, v0 + rows) only;
// a token outside them gives a zero row (the group's rows summed give the embedding) and no
// gradient here. v0 = 0 with the whole table: the plain embedding.
// The backward is parallel over the d columns and serial over tokens, so a
// token that appears twice is summed in a fixed order: deterministic, no atomics.
#pragma once

#include "types.hpp"

namespace minilst::kernels {

template <class T>
void embedding_forward(const Mat<T>& x, const Vec<const std::int64_t>& tokens, const Mat<const T>& E,
                       std::int64_t v0 = 0) {
  const std::int64_t rows = E.extent(0);
  Kokkos::parallel_for("embedding_forward",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {x.extent(0), x.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int j) {
        const std::int64_t r = tokens(i) - v0;
        x(i, j) = r >= 0 && r < rows ? E(r, j) : T(0);
      });
}

template <class T>
void embedding_backward(const Mat<master_t<T>>& dE, const Vec<const std::int64_t>& tokens, const Mat<const T>& dx,
                        std::int64_t v0 = 0) {
  // Blocks of columns, tokens in order: one writer per element, a fixed order
  // (deterministic), and contiguous rows on host backends.
  const int S = static_cast<int>(dx.extent(0)), d = static_cast<int>(dx.extent(1));
  const std::int64_t rows = dE.extent(0);
  constexpr int kBlock = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible ? 64 : 1;
  Kokkos::parallel_for("embedding_backward", Kokkos::RangePolicy<ExecSpace>(0, (d + kBlock - 1) / kBlock),
      KOKKOS_LAMBDA(const int b) {
        const int j0 = b * kBlock, n = j0 + kBlock < d ? kBlock : d - j0;
        for (int i = 0; i < S; ++i) {
          const std::int64_t r = tokens(i) - v0;
          if (r < 0 || r >= rows) continue;
          master_t<T>* row = &dE(r, j0);
          const T* src = &dx(i, j0);
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
          for (int c = 0; c < n; ++c) row[c] += src[c];
        }
      });
}

}  // namespace minilst::kernels
