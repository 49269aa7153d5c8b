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
// The run's KernelChoice (gemm_bf16 = avx512_bf16) selects it; src/core/kernel_choice.cpp
// measures it against the fp32 tiles when the deck says auto.
#pragma once

#include <cstddef>

#include "bf16.hpp"

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
