// bfloat16, the storage type of mixed precision: the top 16 bits of an IEEE-754
// float (1 sign, 8 exponent, 7 stored mantissa bits), so it has float's range with
// 8 significant bits. A storage type only: every kernel converts to float to
// compute and accumulates in float (accum_t<bf16> = float).
//   float -> bf16: round to nearest, ties to even (the rounding of CUDA's
//                  __float2bfloat16_rn and of AVX512_BF16's VCVTNEPS2BF16): add
//                  0x7fff plus the lowest kept bit, then truncate. Overflow rounds
//                  to +-inf as IEEE does; NaN stays NaN (made quiet, sign kept).
//   bf16 -> float: exact (the 16 bits shifted up).
// Plain bit operations, so the same code runs on hosts and devices and rounds the
// same everywhere. Widening is implicit (exact): arithmetic on bf16 values is float
// arithmetic. Narrowing is explicit, bf16(x), so every rounding is visible in the
// code; `s += x` on bf16 storage adds in float and rounds once.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>

#include "kernels/types.hpp"

#if defined(__has_builtin) && !defined(__CUDACC__)
#if __has_builtin(__builtin_bit_cast)
#define MINILST_HAS_BIT_CAST 1
#endif
#endif
#ifndef MINILST_HAS_BIT_CAST
#define MINILST_HAS_BIT_CAST 0
#endif

namespace minilst {

KOKKOS_INLINE_FUNCTION std::uint32_t float_bits(float f) {
#if MINILST_HAS_BIT_CAST
  return __builtin_bit_cast(std::uint32_t, f);  // a register move: loops vectorise
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

KOKKOS_INLINE_FUNCTION float float_from_bits(std::uint32_t u) {
#if MINILST_HAS_BIT_CAST
  return __builtin_bit_cast(float, u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// The bf16 bits nearest to f (ties to even).
KOKKOS_INLINE_FUNCTION std::uint16_t bf16_bits_rne(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (u >> 16) | 0x0040u;  // NaN: quiet, sign kept
  return std::uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);  // a select: loops vectorise
}

struct bf16 {
  std::uint16_t bits;

  bf16() = default;
  bf16(const bf16&) = default;
  KOKKOS_INLINE_FUNCTION explicit bf16(float f) : bits(bf16_bits_rne(f)) {}
  // A plain 16-bit store (user-provided, not defaulted: GCC's `omp simd` then
  // vectorises loops that assign bf16 temporaries, which it does not for a struct copy).
  KOKKOS_INLINE_FUNCTION bf16& operator=(const bf16& other) {
    bits = other.bits;
    return *this;
  }
  KOKKOS_INLINE_FUNCTION operator float() const { return float_from_bits(std::uint32_t(bits) << 16); }
  KOKKOS_INLINE_FUNCTION bf16& operator+=(float x) {
    bits = bf16_bits_rne(float(*this) + x);
    return *this;
  }

  KOKKOS_INLINE_FUNCTION static bf16 from_bits(std::uint16_t b) {
    bf16 x;
    x.bits = b;
    return x;
  }
};

// Reductions over bf16 storage accumulate in float; gradients, master weights and
// optimizer moments are float (master_t<bf16>).
template <> struct Accum<bf16> { using type = float; };

namespace kernels {
// dst = src, element by element, rounded to dst's type (the bf16 weight copy from
// the fp32 master after each update).  dst, src: [n]
template <class D, class S>
void copy_rounded(const Vec<D>& dst, const Vec<const S>& src) {
  Kokkos::parallel_for("copy_rounded", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(0, dst.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) { dst(i) = D(src(i)); });
}
}  // namespace kernels

}  // namespace minilst
