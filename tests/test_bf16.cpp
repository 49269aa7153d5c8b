// The bf16 storage type against an independent reference: for every bf16 value the
// conversion to float is exact and converts back to itself; for every float on a
// dense sample of all 2^32 bit patterns (and at every rounding boundary) the
// conversion is the nearest bf16, ties to even, computed here in double from the
// two neighbouring bf16 values; specials (zeros, infinities, NaN, overflow).
// The mixed-precision GEMM (bf16 in, fp32 accumulate) against a double-precision
// product of the same bf16 inputs, across its tile edges, every op, C in bf16 and fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "kernels/bf16.hpp"
#include "core/kernel_choice.hpp"
#include "kernels/gemm.hpp"

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

namespace {
// A [rows, cols] matrix of bf16 values drawn from normal(0, 1), and its values in double.
struct Bf16Matrix {
  Mat<bf16> dev;
  std::vector<double> value;
  Bf16Matrix(std::size_t rows, std::size_t cols, std::uint64_t seed) : dev("m", rows, cols), value(rows * cols) {
    auto h = Kokkos::create_mirror_view(dev);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) {
        h(i, j) = bf16(normal(rng));
        value[i * cols + j] = float(h(i, j));
      }
    Kokkos::deep_copy(dev, h);
  }
};

// C = alpha op(A) op(B) + beta C0 in double; A, B stored [rows, cols] as given.
std::vector<double> product(kernels::Op oa, kernels::Op ob, double alpha, const Bf16Matrix& A, std::size_t a_cols,
                            const Bf16Matrix& B, std::size_t b_cols, double beta, const std::vector<double>& C0,
                            std::size_t m, std::size_t n, std::size_t k) {
  std::vector<double> C(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p) {
        const double a = oa == kernels::Op::N ? A.value[i * a_cols + p] : A.value[p * a_cols + i];
        const double b = ob == kernels::Op::N ? B.value[p * b_cols + j] : B.value[j * b_cols + p];
        s += a * b;
      }
      C[i * n + j] = alpha * s + beta * C0[i * n + j];
    }
  return C;
}
}  // namespace

// The bf16 paths this build and CPU can run (fp32_tiles always; avx512_bf16 with
// AVX512_BF16; cublas on CUDA builds), each as a run's choice.
static std::vector<KernelChoice> bf16_paths() {
  std::vector<KernelChoice> out;
  for (const auto& [path, name] : EnumNames<GemmPath>::table)
    if (runnable_gemm_bf16_paths() & path_bit(path)) {
      KernelChoice c;
      c.gemm_bf16 = path;
      out.push_back(c);
    }
  return out;
}

// Shapes past each block edge of the host paths (dot: 756 rows, 1024 columns, 384
// deep; tiles: 512, 1024, 512), an odd last panel after full ones, tiny and empty
// (k = 0) products, on every path this machine has.
TEST(Bf16Gemm, MatchesDoublePrecisionAcrossPathsTilesOpsAndOutputTypes) {
  using kernels::Op;
  struct Shape { std::size_t m, n, k; };
  for (const KernelChoice& choice : bf16_paths())
  for (const Shape sh : {Shape{780, 1060, 520}, Shape{1513, 40, 385}, Shape{7, 5, 3}, Shape{257, 33, 1},
                         Shape{9, 17, 0}})
    for (Op oa : {Op::N, Op::T})
      for (Op ob : {Op::N, Op::T}) {
        const std::size_t m = sh.m, n = sh.n, k = sh.k;
        const Bf16Matrix A(oa == Op::N ? m : k, oa == Op::N ? k : m, 1), B(ob == Op::N ? k : n, ob == Op::N ? n : k, 2);
        const Bf16Matrix C0(m, n, 3);
        const std::size_t ac = oa == Op::N ? k : m, bc = ob == Op::N ? n : k;
        const auto ref = product(oa, ob, 1.0, A, ac, B, bc, 1.0, C0.value, m, n, k);  // C = op(A) op(B) + C0
        const std::string where = name_of(choice.gemm_bf16) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                                  " k=" + std::to_string(k) + (oa == Op::N ? " N" : " T") + (ob == Op::N ? "N" : "T");
        // fp32 C (a weight gradient): fp32 accumulation, error ~ k 2^-24 of the row's magnitude
        Mat<float> c32("c32", m, n);
        {
          auto h = Kokkos::create_mirror_view(c32);
          for (std::size_t i = 0; i < m * n; ++i) h.data()[i] = float(C0.value[i]);
          Kokkos::deep_copy(c32, h);
        }
        kernels::gemm_optimized(choice, oa, ob, bf16(1.0f), A.dev, B.dev, bf16(1.0f), c32);
        auto h32 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), c32);
        // bf16 C: the fp32 result rounded once (relative 2^-9), plus the accumulation's error
        Mat<bf16> c16("c16", m, n);
        Kokkos::deep_copy(c16, C0.dev);
        kernels::gemm_optimized(choice, oa, ob, bf16(1.0f), A.dev, B.dev, bf16(1.0f), c16);
        auto h16 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), c16);
        const double scale = std::sqrt(double(k)) + 1.0;  // the typical magnitude of an entry
        for (std::size_t i = 0; i < m; ++i)
          for (std::size_t j = 0; j < n; ++j) {
            const double r = ref[i * n + j];
            ASSERT_NEAR(h32(i, j), r, 1e-5 * scale) << where << " fp32 C at " << i << "," << j;
            ASSERT_NEAR(float(h16(i, j)), r, std::abs(r) * std::ldexp(1.0, -8) + 1e-5 * scale)
                << where << " bf16 C at " << i << "," << j;
          }
      }
}

// beta = 0 overwrites C (NaN in C does not survive), as the BLAS does, on every path.
TEST(Bf16Gemm, BetaZeroOverwrites) {
  const Bf16Matrix A(3, 4, 4), B(4, 5, 5);
  for (const KernelChoice& choice : bf16_paths()) {
    Mat<bf16> C("c", 3, 5);
    Kokkos::deep_copy(C, bf16(std::numeric_limits<float>::quiet_NaN()));
    kernels::gemm_optimized(choice, kernels::Op::N, kernels::Op::N, bf16(2.0f), A.dev, B.dev, bf16(0.0f), C);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C);
    const auto ref = product(kernels::Op::N, kernels::Op::N, 2.0, A, 4, B, 5, 0.0, std::vector<double>(15, 0.0), 3, 5, 4);
    for (std::size_t i = 0; i < 15; ++i)
      EXPECT_NEAR(float(h.data()[i]), ref[i], std::abs(ref[i]) * 0.004 + 1e-6) << name_of(choice.gemm_bf16);
  }
}
