// Plain reference of gemm.hpp: C = alpha op(A) op(B) + beta C as the obvious triple
// loop (gemm.hpp hands the product to the run's GEMM path: a blocked BLAS / cuBLAS
// through Kokkos Kernels, oneDNN, or a bf16 path); selected at run time in place of
// gemm, and validated against it in tests/kernels/test_gemm.cpp (Gemm.Reference*).
// Same signature, same semantics.
//   op(X) = X ("N") or X^T ("T");  A: [m,k] or [k,m], B: [k,n] or [n,k], C: [m,n].
//   C_ij = alpha sum_p op(A)_ip op(B)_pj + beta C_ij, one work item per C_ij, p in order.
// beta = 0 overwrites C (=, even where C holds NaN, as BLAS does), beta = 1 accumulates (+=).
// Shapes that do not match throw std::invalid_argument.
#pragma once

#include <stdexcept>
#include <string>

#include "gemm_shape.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T, class AV, class BV, class CV>
void gemm_reference(Op op_a, Op op_b, T alpha, const AV& A, const BV& B, T beta, const CV& C) {
  using Acc = accum_t<T>;
  using TC = typename CV::non_const_value_type;  // fp32 for weight gradients under bf16
  const auto [m, n, k] = gemm_shape("gemm_reference", op_a, op_b, A, B, C);
  if (m == 0 || n == 0) return;
  const bool ta = op_a == Op::T, tb = op_b == Op::T;
  const int K = static_cast<int>(k);
  Kokkos::parallel_for("gemm_reference", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {m, n}),
      KOKKOS_LAMBDA(const int i, const int j) {
        Acc s = 0;
        for (int p = 0; p < K; ++p) s += Acc(ta ? A(p, i) : A(i, p)) * Acc(tb ? B(j, p) : B(p, j));
        C(i, j) = beta == T(0) ? TC(Acc(alpha) * s) : TC(Acc(alpha) * s + Acc(beta) * Acc(C(i, j)));
      });
}

}  // namespace minilst::kernels
