// C = alpha op(A) op(B) + beta C on row-major matrices, done by Kokkos Kernels
// (and so by the BLAS / cuBLAS it was built with).
//   op(X) = X ("N") or X^T ("T");  A: [m,k] or [k,m], B: [k,n] or [n,k], C: [m,n].
// beta = 0 overwrites C (=), beta = 1 accumulates (+=, weight gradients).
// Every linear layer of the model is one call:
//   forward   Y  = X W            gemm(N, N, 1, X, W, 0, Y)
//   backward  dX = dY W^T         gemm(N, T, 1, dY, W, 0|1, dX)
//             dW += X^T dY        gemm(T, N, 1, X, dY, 1, dW)
#pragma once

#include <KokkosBlas3_gemm.hpp>
#include <stdexcept>
#include <string>

#include "types.hpp"

namespace minilst::kernels {

enum class Op { N, T };

// The shape of C = op(A) op(B): {m, n, k}; throws std::invalid_argument, naming `who`, when they do not match.
struct GemmShape {
  std::size_t m, n, k;
};
template <class AV, class BV, class CV>
GemmShape gemm_shape(const char* who, Op op_a, Op op_b, const AV& A, const BV& B, const CV& C) {
  const std::size_t m = C.extent(0), n = C.extent(1);
  const std::size_t k = op_a == Op::N ? A.extent(1) : A.extent(0);
  const std::size_t am = op_a == Op::N ? A.extent(0) : A.extent(1);
  const std::size_t bk = op_b == Op::N ? B.extent(0) : B.extent(1);
  const std::size_t bn = op_b == Op::N ? B.extent(1) : B.extent(0);
  if (am != m || bk != k || bn != n)
    throw std::invalid_argument(std::string(who) + ": shapes do not match: op(A) [" + std::to_string(am) + "," +
                                std::to_string(k) + "], op(B) [" + std::to_string(bk) + "," + std::to_string(bn) +
                                "], C [" + std::to_string(m) + "," + std::to_string(n) + "]");
  return {m, n, k};
}

template <class T, class AV, class BV, class CV>
void gemm(Op op_a, Op op_b, T alpha, const AV& A, const BV& B, T beta, const CV& C) {
  const auto [m, n, k] = gemm_shape("gemm", op_a, op_b, A, B, C);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS may not touch C when k == 0: do beta C ourselves
    Kokkos::parallel_for("gemm_scale_c",
        Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {m, n}),
        KOKKOS_LAMBDA(const int i, const int j) { C(i, j) = beta == T(0) ? T(0) : beta * C(i, j); });
    return;
  }
  KokkosBlas::gemm(op_a == Op::N ? "N" : "T", op_b == Op::N ? "N" : "T", alpha, A, B, beta, C);
}

}  // namespace minilst::kernels
