#include "kernels/gemm_bf16_dot.hpp"


#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

// The AVX512_BF16 intrinsics and __builtin_cpu_supports("avx512bf16"): GCC 11, Clang 12.
#if defined(__x86_64__) && !defined(__CUDACC__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#include <immintrin.h>
#define MINILST_BF16_DOT_X86 1
#define MINILST_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#endif

namespace minilst::kernels {

namespace {
constexpr std::size_t kMr = 14, kNr = 32;  // micro-tile of C
constexpr std::size_t kDotKc = 384;           // k per panel (even: whole pairs)
constexpr std::size_t kDotMc = 756;           // rows of a block (a multiple of kMr)
constexpr std::size_t kNcMax = 1024;       // columns of a block (a multiple of kNr)

std::size_t round_up(std::size_t x, std::size_t m) { return (x + m - 1) / m * m; }

// One 32-bit word holding the bf16 pair (lo, hi) = (x[k], x[k + 1]).
inline std::uint32_t pair_bits(std::uint16_t lo, std::uint16_t hi) { return std::uint32_t(lo) | std::uint32_t(hi) << 16; }

// An operand: op(X)(r, c) = X[r * ld + c], or X[c * ld + r] when transposed.
struct Operand {
  const std::uint16_t* x;
  std::size_t ld;
  bool t;
};

// The pair (x[0], x[1]) of adjacent bf16 in memory as one word.
inline std::uint32_t load_pair(const std::uint16_t* x) {
  std::uint32_t w;
  std::memcpy(&w, x, sizeof w);
  return w;
}

#ifdef MINILST_BF16_DOT_X86
// out[q * lanes + t] = the pair at line t (x + t line_stride) + 2q, for t < width and
// q < pairs, in 4 x 4 blocks transposed in registers (8 memory operations per 16
// pairs instead of 32). Returns the lines done (a multiple of 4; the caller does the rest).
std::size_t transpose_pairs(std::uint32_t* out, std::size_t lanes, const std::uint16_t* x, std::size_t line_stride,
                            std::size_t width, std::size_t pairs) {
  const std::size_t lines = width / 4 * 4, blocks = pairs / 4 * 4;
  for (std::size_t t = 0; t < lines; t += 4) {
    const std::uint16_t* l0 = x + t * line_stride;
    for (std::size_t q = 0; q < blocks; q += 4) {
      __m128 r0 = _mm_loadu_ps(reinterpret_cast<const float*>(l0 + 2 * q));
      __m128 r1 = _mm_loadu_ps(reinterpret_cast<const float*>(l0 + line_stride + 2 * q));
      __m128 r2 = _mm_loadu_ps(reinterpret_cast<const float*>(l0 + 2 * line_stride + 2 * q));
      __m128 r3 = _mm_loadu_ps(reinterpret_cast<const float*>(l0 + 3 * line_stride + 2 * q));
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);  // bits moved, never interpreted as floats
      _mm_storeu_ps(reinterpret_cast<float*>(out + q * lanes + t), r0);
      _mm_storeu_ps(reinterpret_cast<float*>(out + (q + 1) * lanes + t), r1);
      _mm_storeu_ps(reinterpret_cast<float*>(out + (q + 2) * lanes + t), r2);
      _mm_storeu_ps(reinterpret_cast<float*>(out + (q + 3) * lanes + t), r3);
    }
    for (std::size_t u = t; u < t + 4; ++u)
      for (std::size_t q = blocks; q < pairs; ++q) out[q * lanes + u] = load_pair(x + u * line_stride + 2 * q);
  }
  return lines;
}
#else
std::size_t transpose_pairs(std::uint32_t*, std::size_t, const std::uint16_t*, std::size_t, std::size_t,
                            std::size_t) {
  return 0;
}
#endif

// A packed strip of `width` (<= `lanes`) lines of op(X): line t at `line_stride`
// words... written as out[q * lanes + t] = pair q of line t, for kp pairs, where a
// line is a row of X read along k. `contiguous`: the pair is adjacent in memory
// (x = line start, k along the row); else the two k are rows of X, `ld` apart
// (x = the line's element at k = 0). Lines past `width` and the last pair's
// missing half (odd kc) are zero.
void pack_strip(std::uint32_t* out, std::size_t lanes, const std::uint16_t* x, std::size_t line_stride,
                std::size_t ld, bool contiguous, std::size_t width, std::size_t kc) {
  const std::size_t kp = (kc + 1) / 2, full = kc / 2;
  if (contiguous) {
    const std::size_t done = transpose_pairs(out, lanes, x, line_stride, width, full);
    for (std::size_t t = done; t < width; ++t) {  // the rest: read a line along k, write a column of the strip
      const std::uint16_t* line = x + t * line_stride;
      for (std::size_t q = 0; q < full; ++q) out[q * lanes + t] = load_pair(line + 2 * q);
    }
    if (kc % 2)
      for (std::size_t t = 0; t < width; ++t) out[full * lanes + t] = pair_bits(x[t * line_stride + kc - 1], 0);
  } else {
    for (std::size_t q = 0; q < kp; ++q) {  // two rows of X per pair, each read across the lines
      const std::uint16_t* lo = x + 2 * q * ld;
      const std::uint16_t* hi = 2 * q + 1 < kc ? lo + ld : nullptr;
      std::uint32_t* dst = out + q * lanes;
      if (line_stride == 1 && hi) {  // the common case, in a loop the compiler vectorises
        for (std::size_t t = 0; t < width; ++t) dst[t] = pair_bits(lo[t], hi[t]);
      } else {
        for (std::size_t t = 0; t < width; ++t) dst[t] = pair_bits(lo[t * line_stride], hi ? hi[t * line_stride] : 0);
      }
    }
  }
  for (std::size_t q = 0; q < kp; ++q)
    for (std::size_t t = width; t < lanes; ++t) out[q * lanes + t] = 0;
}

// op(A)[i0 .. i0 + mc, p0 .. p0 + kc] as strips of kMr rows: strip s, pair q, row r at
// (s kp + q) kMr + r, kp = kc / 2 rounded up; zero outside the matrix.
void pack_a(std::uint32_t* out, const Operand& A, std::size_t i0, std::size_t mc, std::size_t p0, std::size_t kc) {
  const std::size_t kp = (kc + 1) / 2;
  for (std::size_t s = 0; s * kMr < mc; ++s) {
    const std::size_t i = i0 + s * kMr, width = std::min(kMr, mc - s * kMr);
    // op N: row i of A holds k contiguously; op T: A[p][i], k down the column
    const std::uint16_t* x = A.t ? A.x + p0 * A.ld + i : A.x + i * A.ld + p0;
    pack_strip(out + s * kp * kMr, kMr, x, A.t ? 1 : A.ld, A.ld, !A.t, width, kc);
  }
}

// op(B)[p0 .. p0 + kc, j0 .. j0 + nc] as strips of kNr columns: strip s, pair q,
// column j at (s kp + q) kNr + j; zero outside the matrix.
void pack_b(std::uint32_t* out, const Operand& B, std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc) {
  const std::size_t kp = (kc + 1) / 2;
  for (std::size_t s = 0; s * kNr < nc; ++s) {
    const std::size_t j = j0 + s * kNr, width = std::min(kNr, nc - s * kNr);
    // op N: B[p][j], k down the column; op T: row j of B holds k contiguously
    const std::uint16_t* x = B.t ? B.x + j * B.ld + p0 : B.x + p0 * B.ld + j;
    pack_strip(out + s * kp * kNr, kNr, x, B.t ? B.ld : 1, B.ld, B.t, width, kc);
  }
}

#ifdef MINILST_BF16_DOT_X86
// c[kMr, kNr] (row stride ldc, fp32) = (first ? 0 : c) + a-strip x b-strip over kp pairs.
MINILST_TARGET_BF16 void micro_kernel(std::size_t kp, const std::uint32_t* a, const std::uint32_t* b, float* c,
                                      std::size_t ldc, bool first) {
  constexpr std::size_t kNv = kNr / 16;  // zmm vectors across a row of the tile
  __m512 acc[kMr][kNv];
#pragma GCC unroll 16
  for (std::size_t r = 0; r < kMr; ++r)
#pragma GCC unroll 4
    for (std::size_t v = 0; v < kNv; ++v) acc[r][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + r * ldc + 16 * v);
  for (std::size_t q = 0; q < kp; ++q) {
    __m512bh bq[kNv];
#pragma GCC unroll 4
    for (std::size_t v = 0; v < kNv; ++v) bq[v] = (__m512bh)_mm512_loadu_si512(b + q * kNr + 16 * v);
    const std::uint32_t* aq = a + q * kMr;
#pragma GCC unroll 16
    for (std::size_t r = 0; r < kMr; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(int(aq[r]));
#pragma GCC unroll 4
      for (std::size_t v = 0; v < kNv; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], bq[v], ar);
    }
  }
#pragma GCC unroll 16
  for (std::size_t r = 0; r < kMr; ++r)
#pragma GCC unroll 4
    for (std::size_t v = 0; v < kNv; ++v) _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
}
#else
void micro_kernel(std::size_t, const std::uint32_t*, const std::uint32_t*, float*, std::size_t, bool) {
  throw std::logic_error("gemm_bf16_dot: this build has no bf16 dot-product kernel");
}
#endif

// Per host thread: the packed panels and the block's fp32 accumulator.
struct Buffers {
  std::vector<std::uint32_t> a, b;
  std::vector<float> c;
};
Buffers& thread_buffers() {
  thread_local Buffers buffers;
  return buffers;
}

struct Problem {
  Operand A, B;
  std::size_t m, n, k, nc;
  float alpha, beta;
  float* c32;
  bf16* c16;
  std::size_t ldc;
};

// Block (i0, j0) of C: packs, multiplies over all panels of k, writes alpha acc + beta C.
void block(const Problem& P, std::size_t i0, std::size_t j0) {
  const std::size_t mc = std::min(kDotMc, P.m - i0), nc = std::min(P.nc, P.n - j0);
  const std::size_t mp = round_up(mc, kMr), np = round_up(nc, kNr);
  auto& buf = thread_buffers();
  if (P.k == 0) buf.c.assign(mp * np, 0.0f);  // no panel: C = beta C
  else buf.c.resize(mp * np);                 // the first panel overwrites it
  buf.a.resize(mp * kDotKc / 2);
  buf.b.resize(np * kDotKc / 2);
  for (std::size_t p0 = 0; p0 < P.k; p0 += kDotKc) {
    const std::size_t kc = std::min(kDotKc, P.k - p0), kp = (kc + 1) / 2;
    pack_a(buf.a.data(), P.A, i0, mc, p0, kc);
    pack_b(buf.b.data(), P.B, p0, kc, j0, nc);
    for (std::size_t js = 0; js < np / kNr; ++js)
      for (std::size_t is = 0; is < mp / kMr; ++is)
        micro_kernel(kp, buf.a.data() + is * kp * kMr, buf.b.data() + js * kp * kNr,
                     buf.c.data() + is * kMr * np + js * kNr, np, p0 == 0);
  }
  for (std::size_t i = 0; i < mc; ++i) {
    const float* acc = buf.c.data() + i * np;
    if (P.c32) {
      float* row = P.c32 + (i0 + i) * P.ldc + j0;
      for (std::size_t j = 0; j < nc; ++j) row[j] = P.alpha * acc[j] + (P.beta == 0.0f ? 0.0f : P.beta * row[j]);
    } else {
      bf16* row = P.c16 + (i0 + i) * P.ldc + j0;
      for (std::size_t j = 0; j < nc; ++j)
        row[j] = bf16(P.alpha * acc[j] + (P.beta == 0.0f ? 0.0f : P.beta * float(row[j])));
    }
  }
}
}  // namespace

bool cpu_has_bf16_dot() {
#ifdef MINILST_BF16_DOT_X86
  static const bool has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  return has;
#else
  return false;
#endif
}

void gemm_bf16_dot(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const bf16* A,
                   std::size_t lda, const bf16* B, std::size_t ldb, float beta, float* c32, bf16* c16,
                   std::size_t ldc) {
  if (!cpu_has_bf16_dot()) throw std::logic_error("gemm_bf16_dot: this CPU has no AVX512_BF16");
  if (m == 0 || n == 0) return;
  static_assert(sizeof(bf16) == sizeof(std::uint16_t), "bf16 is its 16 bits");
  Problem P{{reinterpret_cast<const std::uint16_t*>(A), lda, ta}, {reinterpret_cast<const std::uint16_t*>(B), ldb, tb},
            m, n, k, kNcMax, alpha, beta, c32, c16, ldc};
  using Host = Kokkos::DefaultHostExecutionSpace;
  const std::size_t threads = std::size_t(Host().concurrency()), row_blocks = (m + kDotMc - 1) / kDotMc;
  // Narrower blocks where the rows alone would leave threads idle.
  while (P.nc > kNr && row_blocks * ((n + P.nc - 1) / P.nc) < threads) P.nc /= 2;
  const std::size_t col_blocks = (n + P.nc - 1) / P.nc;
  Kokkos::parallel_for("gemm_bf16_dot", Kokkos::RangePolicy<Host>(0, int(row_blocks * col_blocks)),
                       [&](const int t) { block(P, std::size_t(t) % row_blocks * kDotMc, std::size_t(t) / row_blocks * P.nc); });
  Kokkos::fence();
}

}  // namespace minilst::kernels
