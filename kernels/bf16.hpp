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
// same everywhere.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>

#include "kernels/types.hpp"

namespace minilst {

KOKKOS_INLINE_FUNCTION std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

KOKKOS_INLINE_FUNCTION float float_from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The bf16 bits nearest to f (ties to even).
KOKKOS_INLINE_FUNCTION std::uint16_t bf16_bits_rne(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x0040u);  // NaN: quiet, sign kept
  return std::uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

struct bf16 {
  std::uint16_t bits;

  bf16() = default;
  KOKKOS_INLINE_FUNCTION explicit bf16(float f) : bits(bf16_bits_rne(f)) {}
  KOKKOS_INLINE_FUNCTION explicit operator float() const { return float_from_bits(std::uint32_t(bits) << 16); }

  KOKKOS_INLINE_FUNCTION static bf16 from_bits(std::uint16_t b) {
    bf16 x;
    x.bits = b;
    return x;
  }
};

// Reductions over bf16 storage accumulate in float.
template <> struct Accum<bf16> { using type = float; };

}  // namespace minilst
