// Tile-level building blocks of the attention kernels: a dense tile product and
// a vectorisable exp, each with a host and a device form behind one call.
//
// mm:  C[m][n] (= or +=) sum_k A(m, k) B[k][n]     m < M, n < N, k < K
//   A(m, k) = a[m * a_m + k * a_k]  (any strides: a tile or its transpose)
//   B: rows of N contiguous elements, ldb apart;  C: ldc apart
//   N % 16 == 0: callers pad their tiles (padding columns are zero, so they add
//   nothing); any M.
//   host    a team of one: a register-blocked MR x NR micro-kernel whose accumulators
//           stay in vector registers across the k loop, blocked for the build's ISA
//           (host::blocking<A>(): 4 x 64 floats on AVX-512, 6 x 16 on AVX2), about 80% of
//           the machine's SGEMM rate on 64 x 64 x 64 float tiles with AVX-512
//   device  the team's threads share the M x N outputs, then a team barrier
// exp: on host for float a polynomial after range reduction (relative error
//   < 1e-7, exp(-inf) = 0) that the compiler vectorises in `omp simd` loops; the
//   math library's exp for double (exactness checks) and on devices.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels::tile {

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(__SYCL_DEVICE_ONLY__)
#define MINILST_DEVICE_PASS 1
#endif

// e^x: exp(x) = 2^k e^r, k = round(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2], e^r by a
// degree-6 polynomial (Cephes' expf coefficients).
KOKKOS_INLINE_FUNCTION float exp(float x) {
#ifdef MINILST_DEVICE_PASS
  return compat::exp(x);
#else
  const float lo = -87.3365447505531f, hi = 88.3762626647949f;
  const float xc = x < lo ? lo : (x > hi ? hi : x);
  const float k = __builtin_nearbyintf(xc * 1.44269504088896341f);
  float r = __builtin_fmaf(k, -0.693359375f, xc);
  r = __builtin_fmaf(k, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = __builtin_fmaf(p, r, 1.3981999507e-3f);
  p = __builtin_fmaf(p, r, 8.3334519073e-3f);
  p = __builtin_fmaf(p, r, 4.1665795894e-2f);
  p = __builtin_fmaf(p, r, 1.6666665459e-1f);
  p = __builtin_fmaf(p, r, 5.0000001201e-1f);
  p = __builtin_fmaf(p * r, r, r) + 1.0f;
  const std::int32_t bits = (std::int32_t(k) + 127) << 23;  // 2^k
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < lo ? 0.0f : p * scale;
#endif
}
KOKKOS_INLINE_FUNCTION double exp(double x) { return compat::exp(x); }

#ifndef MINILST_DEVICE_PASS
namespace host {
// One MR x NR block of C, its accumulators in registers for the whole k loop.
template <int MR, int NR, class A>
inline void micro(int K, const A* __restrict__ a, int a_m, int a_k, const A* __restrict__ b, int ldb,
                  A* __restrict__ c, int ldc, bool accumulate) {
  A acc[MR][NR];
  for (int r = 0; r < MR; ++r)
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
    for (int n = 0; n < NR; ++n) acc[r][n] = accumulate ? c[r * ldc + n] : A(0);
  for (int k = 0; k < K; ++k) {
    const A* bk = b + std::ptrdiff_t(k) * ldb;
    for (int r = 0; r < MR; ++r) {
      const A ar = a[r * a_m + k * a_k];
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
      for (int n = 0; n < NR; ++n) acc[r][n] += ar * bk[n];
    }
  }
  for (int r = 0; r < MR; ++r)
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
    for (int n = 0; n < NR; ++n) c[r * ldc + n] = acc[r][n];
}

// Rows m0 .. M-1 in blocks of MR, the last M % MR rows in one smaller block.
template <int MR, int NR, class A>
inline void blocks(int M, int N, int K, const A* a, int a_m, int a_k, const A* b, int ldb, A* c, int ldc,
                   bool accumulate) {
  const int Mb = M - M % MR;
  for (int m = 0; m < Mb; m += MR)
    for (int n = 0; n < N; n += NR)
      micro<MR, NR>(K, a + m * a_m, a_m, a_k, b + n, ldb, c + m * ldc + n, ldc, accumulate);
  if (Mb == M) return;
  if constexpr (MR > 1) {
    const int rest = M - Mb;
    const auto tail = [&](auto rows) {
      constexpr int R = decltype(rows)::value;
      for (int n = 0; n < N; n += NR)
        micro<R, NR>(K, a + Mb * a_m, a_m, a_k, b + n, ldb, c + Mb * ldc + n, ldc, accumulate);
    };
    switch (rest) {  // MR <= 6
      case 5: tail(std::integral_constant<int, 5>()); break;
      case 4: tail(std::integral_constant<int, 4>()); break;
      case 3: tail(std::integral_constant<int, 3>()); break;
      case 2: tail(std::integral_constant<int, 2>()); break;
      default: tail(std::integral_constant<int, 1>()); break;
    }
  }
}

// The register blocking for the build's vector ISA: the MR x NR accumulators must stay
// in vector registers across the k loop, with room for a row of B and a broadcast of A.
//   AVX-512 (32 registers of 64 bytes)  MR = 4, NR = 4 registers (64 floats, 32 doubles),
//     or 2 or 1 register(s) where N is not a multiple: at most 16 accumulators
//   otherwise (AVX2: 16 registers of 32 bytes; 128-bit ISAs)  MR = 6, NR = 2 registers
//     (16 floats, 8 doubles on AVX2): 12 accumulators + 2 for B + 1 broadcast
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64, kMR = 4, kRegistersPerRow = 4;
#elif defined(__AVX2__) || defined(__AVX__)
constexpr int kVectorBytes = 32, kMR = 6, kRegistersPerRow = 2;
#else
constexpr int kVectorBytes = 16, kMR = 6, kRegistersPerRow = 2;
#endif

// The widest block for A: "avx512: 4 x 64" (floats), "avx2: 6 x 8" (doubles), ...
template <class A>
inline std::string blocking() {
  const char* isa = kVectorBytes == 64 ? "avx512" : kVectorBytes == 32 ? "avx2" : "128-bit";
  return std::string(isa) + ": " + std::to_string(kMR) + " x " +
         std::to_string(kRegistersPerRow * kVectorBytes / int(sizeof(A)));
}

template <class A>
inline void product(int M, int N, int K, const A* a, int a_m, int a_k, const A* b, int ldb, A* c, int ldc,
                    bool accumulate) {
  constexpr int V = kVectorBytes / int(sizeof(A));  // elements per vector register
  constexpr int NR = kRegistersPerRow * V;
  static_assert(NR % 16 == 0 || 16 % NR == 0, "tile::mm pads N to 16");
  if constexpr (NR > 16) {  // fewer registers per row where N is not a multiple of the widest block
    if (N % NR == 0) return blocks<kMR, NR>(M, N, K, a, a_m, a_k, b, ldb, c, ldc, accumulate);
    if constexpr (NR / 2 > 16)
      if (N % (NR / 2) == 0) return blocks<kMR, NR / 2>(M, N, K, a, a_m, a_k, b, ldb, c, ldc, accumulate);
    blocks<kMR, 16>(M, N, K, a, a_m, a_k, b, ldb, c, ldc, accumulate);
  } else {
    blocks<kMR, NR>(M, N, K, a, a_m, a_k, b, ldb, c, ldc, accumulate);
  }
}
}  // namespace host
#endif

template <class Member, class A>
KOKKOS_INLINE_FUNCTION void mm(const Member& team, int M, int N, int K, const A* a, int a_m, int a_k, const A* b,
                               int ldb, A* c, int ldc, bool accumulate) {
#ifdef MINILST_DEVICE_PASS
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, M * N), [&](const int idx) {
    const int m = idx / N, n = idx % N;
    A s = accumulate ? c[m * ldc + n] : A(0);
    for (int k = 0; k < K; ++k) s += a[m * a_m + k * a_k] * b[k * ldb + n];
    c[m * ldc + n] = s;
  });
  team.team_barrier();
#else
  (void)team;
  host::product(M, N, K, a, a_m, a_k, b, ldb, c, ldc, accumulate);
#endif
}

// A loop over the rows of a tile, shared by the team's threads (then a barrier).
template <class Member, class F>
KOKKOS_INLINE_FUNCTION void for_rows(const Member& team, int rows, const F& f) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), f);
  team.team_barrier();
}

}  // namespace minilst::kernels::tile
