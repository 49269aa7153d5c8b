// Plain reference of embedding.hpp's backward: the scatter-add one column per work
// item (no blocks of columns, no vectorised rows); selected at run time in place of
// embedding_backward, and validated against it in tests/kernels/test_embedding.cpp
// (Embedding.Reference*). Same signature, same semantics. (embedding_forward, a plain
// gather, has no reference.)
//   S tokens, V vocab, d hidden.  tokens: [S]  dx: [S, d]  dE: [V, d]
//   backward  dE[tok[i], :] += dx[i, :]             dE: [V, d] (+=)
//   (vocabulary shards: dE holds the rows of tokens [v0, v0 + rows), other tokens skipped)
// Each column's tokens are summed in order: a token that appears twice adds up in a
// fixed order (deterministic), every element of dE has one writer (no atomics).
#pragma once

#include "types.hpp"

namespace minilst::kernels {

template <class T>
void embedding_backward_reference(const Mat<master_t<T>>& dE, const Vec<const std::int64_t>& tokens, const Mat<const T>& dx,
                                  std::int64_t v0 = 0) {
  const int S = static_cast<int>(dx.extent(0));
  const std::int64_t rows = dE.extent(0);
  Kokkos::parallel_for("embedding_backward_reference", Kokkos::RangePolicy<ExecSpace>(0, dx.extent(1)),
      KOKKOS_LAMBDA(const int j) {
        for (int i = 0; i < S; ++i)
          if (tokens(i) >= v0 && tokens(i) - v0 < rows) dE(tokens(i) - v0, j) += dx(i, j);
      });
}

}  // namespace minilst::kernels
