// The host GEMM of mixed precision on CPUs with bf16 dot-product instructions
// (x86 AVX512_BF16: VDPBF16PS, two bf16 products added into each fp32 lane):
//   C[m, n] = alpha op(A) op(B) + beta C     A, B bf16; C float or bf16; fp32 accumulation
// on row-major host arrays with leading dimensions. Goto-style blocking:
//   a block of C, 756 x 1024, per task (tasks run in parallel on the host threads),
//   accumulated in fp32 over panels of 384 along k (per thread: 4.4 MiB of packed
//   panels and accumulator, kept by the thread, outside the memory plan);
//   op(A) packed in strips of kMr rows, op(B) in strips of kNr columns, each as
//   k-pairs (two adjacent k of one row or column in one 32-bit word: the operand
//   layout of VDPBF16PS), zero-padded at the edges;
//   a 14 x 32 micro-kernel: 28 zmm accumulators, per k-pair two B loads, 14
//   broadcasts of A pairs, 28 VDPBF16PS (64 FLOPs each); measured on Zen 5 against
//   12 x 32, 8 x 48 and 6 x 64 (docs/benchmarks.md).
// The packing reads any op, so the micro-kernel never sees a transpose.
// Where the CPU lacks the instructions, kernels/gemm_tiles.hpp converts to fp32.
#pragma once

#include <cstddef>
#include <string>

#include "bf16.hpp"

namespace minilst::kernels {

// The host's bf16 GEMM, chosen once per process at the first bf16 product: with
// AVX512_BF16 both paths are timed on a 384 x 1024 x 768 product and the faster
// kept; without it fp32_tiles. MINILST_BF16_GEMM=dot | fp32_tiles forces one (tests).
struct Bf16GemmChoice {
  std::string path;    // "avx512_bf16" | "fp32_tiles" (| "cublas_bf16": bf16_gemm_in_use on CUDA)
  std::string reason;  // "measured", "no bf16 dot-product instructions on this CPU", "forced by ..."
  double dot_gflops = 0, tiles_gflops = 0;  // the measured rates (0: not measured)
};
const Bf16GemmChoice& bf16_gemm_choice();
// Makes this process use `path` (rank 0's choice, so that every rank of a run
// multiplies alike): kept where this CPU cannot run it.
void adopt_bf16_gemm_path(const std::string& path);

}  // namespace minilst::kernels

namespace minilst {
// The bf16 GEMM this build's execution space uses: the host's choice above, or on
// devices fp32 tiles through the device BLAS.
kernels::Bf16GemmChoice bf16_gemm_in_use();
}  // namespace minilst

namespace minilst::kernels {

// Whether this CPU has AVX512_BF16 (decided once, at the first call).
bool cpu_has_bf16_dot();

// The product above, on this host thread's CPU. Requires cpu_has_bf16_dot().
// ta, tb: op(A) = A^T, op(B) = B^T. lda, ldb, ldc: elements between rows.
// Exactly one of c32 (fp32 C) and c16 (bf16 C) is non-null.
void gemm_bf16_dot(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const bf16* A,
                   std::size_t lda, const bf16* B, std::size_t ldb, float beta, float* c32, bf16* c16,
                   std::size_t ldc);

}  // namespace minilst::kernels
