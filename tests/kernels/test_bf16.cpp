// bf16 (kernels/bf16.hpp): the bf16 storage type against an independent reference. For every
// bf16 value the conversion to float is exact and converts back to itself; for every float on a
// dense sample of all 2^32 bit patterns (and at every rounding boundary) the conversion is the
// nearest bf16, ties to even, computed here in double from the two neighbouring bf16 values;
// specials (zeros, infinities, NaN, overflow). (The bf16 GEMM: test_gemm.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/bf16.hpp"

using namespace minilst;

namespace {

// The nearest bf16 to a finite float, ties to even, decided in double arithmetic.
std::uint16_t nearest_bf16(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint16_t down = std::uint16_t(u >> 16);       // towards zero
  const std::uint16_t up = std::uint16_t(down + 1);        // away from zero (may be inf)
  const double x = std::fabs(double(f));
  const double lo = std::fabs(double(float(bf16::from_bits(down))));
  const double hi = (up & 0x7fffu) == 0x7f80u ? std::ldexp(1.0, 128) : std::fabs(double(float(bf16::from_bits(up))));
  if (x - lo < hi - x) return down;
  if (x - lo > hi - x) return up;
  return (down & 1u) ? up : down;
}

}  // namespace

TEST(Bf16, EveryValueRoundTrips) {
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = float(bf16::from_bits(std::uint16_t(b)));
    EXPECT_EQ(float_bits(f), b << 16);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(float(bf16(f))));
    } else {
      ASSERT_EQ(bf16(f).bits, b) << std::hex << b;
    }
  }
}

TEST(Bf16, RoundsToNearestEven) {
  std::uint64_t checked = 0;
  const auto check = [&](std::uint32_t u) {
    const float f = float_from_bits(u);
    if (!std::isfinite(f)) return;
    ASSERT_EQ(bf16(f).bits, nearest_bf16(f)) << std::hex << u;
    ++checked;
  };
  for (std::uint64_t u = 0; u < (1ull << 32); u += 251) check(std::uint32_t(u));  // a dense sample of all floats
  for (std::uint32_t hi = 0; hi < 0x10000u; ++hi)                                 // every boundary: ties and neighbours
    for (std::uint32_t lo : {0x7fffu, 0x8000u, 0x8001u, 0x0001u, 0xffffu}) check((hi << 16) | lo);
  EXPECT_GT(checked, 17000000u);
}

TEST(Bf16, Specials) {
  EXPECT_EQ(bf16(0.0f).bits, 0x0000);
  EXPECT_EQ(bf16(-0.0f).bits, 0x8000);
  EXPECT_EQ(bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(bf16(-2.0f).bits, 0xc000);
  EXPECT_EQ(bf16(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  EXPECT_EQ(bf16(-std::numeric_limits<float>::infinity()).bits, 0xff80);
  EXPECT_EQ(bf16(std::numeric_limits<float>::max()).bits, 0x7f80);  // overflow rounds to inf
  EXPECT_EQ(bf16(float_from_bits(0x7f7f7fffu)).bits, 0x7f7f);        // the largest finite bf16 stays finite
  const bf16 nan(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(float(nan)));
  EXPECT_TRUE(std::isnan(float(bf16(float_from_bits(0x7f800001u)))));  // a signalling NaN whose top bits are inf's
  EXPECT_EQ(bf16(float_from_bits(0xff800001u)).bits & 0x8000u, 0x8000u);  // NaN keeps its sign
  EXPECT_EQ(bf16(1.0f + 1.0f / 256).bits, 0x3f80);  // a tie: to even (down)
  EXPECT_EQ(bf16(1.0f + 3.0f / 256).bits, 0x3f82);  // a tie: to even (up)
  EXPECT_EQ(float(bf16(3.14159265f)), 3.140625f);
  static_assert(sizeof(bf16) == 2, "bf16 is 16 bits");
  static_assert(std::is_same<accum_t<bf16>, float>::value, "bf16 accumulates in float");
}
