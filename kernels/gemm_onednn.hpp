// Products through oneDNN's matmul primitive on x86 hosts (oneDNN 2.x, Debian's
// libdnnl-dev; builds with MINILST_HAVE_ONEDNN):
//   C[m, n] = alpha op(A) op(B) + beta C      row-major host arrays with leading dimensions
//   bf16: A, B bf16, fp32 accumulation, C fp32 or bf16;  f32: A, B, C fp32
// oneDNN picks its implementation for the CPU it runs on: the AMX tile unit on Xeons
// that have it (brg:avx512_core_amx_bf16, Sapphire Rapids and later), AVX512_BF16
// dot products (Zen 4/5, Cooper Lake), AVX-512 or AVX2 otherwise; the environment
// variable ONEDNN_MAX_CPU_ISA caps it (how the tests run the lesser paths on any CPU).
// A transpose is a stride of the memory descriptor (nothing is copied); alpha is an
// output scale and beta != 0 a sum post-op (C += ...). A primitive is made once per
// problem (shape, strides, types, alpha, beta) and kept for the process: the step's
// shapes repeat every step, and making one costs far more than running a small one.
// Threads: oneDNN's OpenMP runtime (OMP_NUM_THREADS, the same pool as a Kokkos OpenMP
// build); called inside a host parallel region, a product runs on the calling thread.
// The run's KernelChoice selects it (gemm_bf16 = onednn, gemm_fp32 = onednn).
#pragma once

#include <cstddef>
#include <string>

#include "bf16.hpp"

namespace minilst::kernels {

// Whether this build has oneDNN, and whether oneDNN can multiply bf16 here (it has no bf16
// matmul on CPUs without AVX-512, or with ONEDNN_MAX_CPU_ISA=AVX2).
bool onednn_available();
bool onednn_bf16_available();

// Exactly one of c32 (fp32 C) and c16 (bf16 C) is non-null.
void gemm_onednn_bf16(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const bf16* A,
                      std::size_t lda, const bf16* B, std::size_t ldb, float beta, float* c32, bf16* c16,
                      std::size_t ldc);
void gemm_onednn_f32(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* A,
                     std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc);

// The implementation oneDNN chooses for a large product of these types on this CPU
// ("brg:avx512_core_amx_bf16", "brg:avx512_core_bf16", "gemm:jit", ...), as the run records it.
std::string onednn_implementation(bool bf16);

// The CPU's bf16 matrix hardware as oneDNN may use it (after ONEDNN_MAX_CPU_ISA): "amx_bf16",
// "avx512_bf16" or "none".
std::string cpu_matrix_isa();

}  // namespace minilst::kernels
