// The device GEMM of mixed precision on CUDA builds: cuBLAS's cublasGemmEx with
// bf16 A and B (CUDA_R_16BF: the same 16 bits as kernels/bf16.hpp), fp32 compute
// (CUBLAS_COMPUTE_32F, the tensor cores), C in fp32 or bf16, on Kokkos's CUDA
// stream. Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B goes
// first. Compiled only where Kokkos has CUDA (kernels/gemm_bf16_cublas.cpp).
#pragma once

#include <cstddef>

#include "bf16.hpp"

namespace minilst::kernels {

// Same arguments as gemm_bf16_dot (kernels/gemm_bf16_dot.hpp), on device pointers.
void gemm_bf16_cublas(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const bf16* A,
                      std::size_t lda, const bf16* B, std::size_t ldb, float beta, float* c32, bf16* c16,
                      std::size_t ldc);

}  // namespace minilst::kernels
