// C = alpha op(A) op(B) + beta C on row-major matrices, by the path the run's
// KernelChoice names: Kokkos Kernels (and so the BLAS / cuBLAS it was built with),
// oneDNN on hosts, or a bf16 path (below).
//   op(X) = X ("N") or X^T ("T");  A: [m,k] or [k,m], B: [k,n] or [n,k], C: [m,n].
// beta = 0 overwrites C (=), beta = 1 accumulates (+=, weight gradients).
// Every linear layer of the model is one call:
//   forward   Y  = X W            gemm(N, N, 1, X, W, 0, Y)
//   backward  dX = dY W^T         gemm(N, T, 1, dY, W, 0|1, dX)
//             dW += X^T dY        gemm(T, N, 1, X, dY, 1, dW)
// Operands of one type, float or double: the BLAS's own GEMM. Mixed precision
// (bf16 activations and weights, fp32 weight gradients): gemm_mixed below. Which
// path runs is the run's KernelChoice (kernels/kernel_choice.hpp), an argument.
#pragma once

#include <KokkosBlas3_gemm.hpp>
#include <stdexcept>
#include <type_traits>

#include "bf16.hpp"
#include "gemm_bf16_dot.hpp"
#include "gemm_onednn.hpp"
#ifdef KOKKOS_ENABLE_CUDA
#include "gemm_bf16_cublas.hpp"
#endif
#include "gemm_shape.hpp"
#include "gemm_tiles.hpp"
#include "kernel_choice.hpp"
#include "types.hpp"

namespace minilst::kernels {

// Products with a bf16 operand, by the run's path (kernels/kernel_choice.hpp): bf16 A
// and B go to cuBLAS (device memory), or on hosts to oneDNN or the AVX512_BF16 kernel,
// where the path says so; every other case, and fp32_tiles, through fp32 tiles and the BLAS.
// fp32_path: the fp32 tiles' product (the run's gemm_fp32).
template <class AV, class BV, class CV>
void gemm_mixed(GemmPath path, Op op_a, Op op_b, float alpha, const AV& A, const BV& B, float beta, const CV& C,
                GemmPath fp32_path = GemmPath::blas) {
  using TC = typename CV::non_const_value_type;
  constexpr bool host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;
  constexpr bool bf16_in = std::is_same<typename AV::non_const_value_type, bf16>::value &&
                           std::is_same<typename BV::non_const_value_type, bf16>::value;
  constexpr bool c_ok = std::is_same<TC, float>::value || std::is_same<TC, bf16>::value;
  if (path == GemmPath::automatic) throw std::logic_error("gemm: the bf16 GEMM path was never resolved");
  if constexpr (bf16_in && c_ok) {
    const auto call = [&](auto&& library) {  // library(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, c32, c16, ldc)
      const auto [m, n, k] = gemm_shape("gemm", op_a, op_b, A, B, C);
      float* c32 = nullptr;
      bf16* c16 = nullptr;
      if constexpr (std::is_same<TC, float>::value) c32 = C.data();
      else c16 = C.data();
      library(op_a == Op::T, op_b == Op::T, m, n, k, alpha, A.data(), A.stride(0), B.data(), B.stride(0), beta, c32,
              c16, C.stride(0));
    };
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same<MemSpace, Kokkos::CudaSpace>::value) {
      if (path == GemmPath::cublas) {
        call(gemm_bf16_cublas);
        return;
      }
    }
#endif
    if constexpr (host) {
      if (path == GemmPath::avx512_bf16 || path == GemmPath::onednn) {
        ExecSpace().fence();
        path == GemmPath::onednn ? call(gemm_onednn_bf16) : call(gemm_bf16_dot);
        return;
      }
    }
  }
  gemm_fp32_tiles(op_a, op_b, alpha, A, B, beta, C, fp32_path);
}

// The optimized GEMM of the run's choice: operands of one type, float or double, by
// the BLAS (fp64 always; fp32 with gemm_fp32 = blas) or oneDNN (gemm_fp32 = onednn);
// a bf16 operand by gemm_mixed and gemm_bf16.
template <class T, class AV, class BV, class CV>
void gemm_optimized(const KernelChoice& choice, Op op_a, Op op_b, T alpha, const AV& A, const BV& B, T beta,
                    const CV& C) {
  using TA = typename AV::non_const_value_type;
  using TC = typename CV::non_const_value_type;
  constexpr bool blas = std::is_same<TA, typename BV::non_const_value_type>::value &&
                        std::is_same<TA, TC>::value && std::is_floating_point<TC>::value;
  if constexpr (!blas) {
    gemm_mixed(choice.gemm_bf16, op_a, op_b, float(alpha), A, B, float(beta), C, choice.gemm_fp32);
  } else {
    const auto [m, n, k] = gemm_shape("gemm", op_a, op_b, A, B, C);
    if constexpr (std::is_same<TC, float>::value) {
      if (choice.gemm_fp32 == GemmPath::automatic) throw std::logic_error("gemm: the fp32 GEMM path was never resolved");
      constexpr bool host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;
      if (host && choice.gemm_fp32 == GemmPath::onednn) {
        ExecSpace().fence();
        gemm_onednn_f32(op_a == Op::T, op_b == Op::T, m, n, k, alpha, A.data(), A.stride(0), B.data(), B.stride(0),
                        beta, C.data(), C.stride(0));
        return;
      }
    }
    if (m == 0 || n == 0) return;
    if (k == 0) {  // BLAS may not touch C when k == 0: do beta C ourselves
      Kokkos::parallel_for("gemm_scale_c",
          Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {m, n}),
          KOKKOS_LAMBDA(const int i, const int j) { C(i, j) = beta == T(0) ? T(0) : beta * C(i, j); });
      return;
    }
    KokkosBlas::gemm(op_a == Op::N ? "N" : "T", op_b == Op::N ? "N" : "T", alpha, A, B, beta, C);
  }
}

}  // namespace minilst::kernels
