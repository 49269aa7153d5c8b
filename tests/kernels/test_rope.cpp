// rope (kernels/rope.hpp): rotate-half rotary position embedding on global positions.
//  * The forward against the header's formula on host; the backward against finite differences
//    (several heads, arbitrary positions); the backward inverts the forward and position 0 is
//    the identity; in double.
//  * The float instantiation against double.
// Each check prints its observed error as "[err] <what> = <value>".
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernel_test_util.hpp"
#include "kernels/rope.hpp"

using namespace minilst::kernel_test;
namespace K = minilst::kernels;

namespace {
constexpr double kRopeTheta = 10000.0;
// Rotate-half RoPE on host, the header's formula.
Host naive_rope(const Host& x, const std::vector<std::int64_t>& pos, int width, int h) {
  Host y = x;
  const int half = h / 2;
  for (std::size_t i = 0; i < pos.size(); ++i)
    for (int n = 0; n < width / h; ++n)
      for (int j = 0; j < half; ++j) {
        const double a = double(pos[i]) * std::pow(kRopeTheta, -2.0 * j / h);
        const std::size_t lo = i * width + n * h + j, hi = lo + half;
        y[lo] = x[lo] * std::cos(a) - x[hi] * std::sin(a);
        y[hi] = x[hi] * std::cos(a) + x[lo] * std::sin(a);
      }
  return y;
}
const std::vector<std::int64_t> kRopePos = {7, 0, 3, 100, 2, 4099};  // arbitrary, not contiguous
constexpr int kRopeHeads = 3, kRopeDim = 8;
}  // namespace

TEST(Rope, ForwardMatchesNaive) {
  Rng rng(10);
  const int W = kRopeHeads * kRopeDim;
  Mat<double> x("x", kRopePos.size(), W);
  fill_random(x, rng);
  const Host x0 = to_host(x);
  K::rope_forward<double>(x, ids(kRopePos), kRopeDim, kRopeTheta);
  const double e = max_abs_diff(to_host(x), naive_rope(x0, kRopePos, W, kRopeDim));
  note("rope forward vs naive (max abs)", e);
  // A GPU's pow, cos and sin may differ from glibc's by a few ulp: an angle error of
  // about pos * ulp (position 4099: ~1e-12); a wrong rotation is off by O(1).
  EXPECT_LE(e, 1e-11);
}

TEST(Rope, BackwardMatchesFiniteDifferencesMultiHeadArbitraryPositions) {
  Rng rng(11);
  const int S = int(kRopePos.size()), W = kRopeHeads * kRopeDim;
  auto pos = ids(kRopePos);
  Mat<double> x("x", S, W), y("y", S, W), R("R", S, W);
  fill_random(x, rng);
  fill_random(R, rng);
  Mat<double> dx = copy_of(R);
  K::rope_backward<double>(dx, pos, kRopeDim, kRopeTheta);  // in place on the gradient
  const Host Rh = to_host(R);
  auto loss = [&] {
    Kokkos::deep_copy(y, x);
    K::rope_forward<double>(y, pos, kRopeDim, kRopeTheta);
    return dot(to_host(y), Rh);
  };
  expect_grad_close("rope dx", to_host(dx), fd_grad(x, loss));
}

TEST(Rope, BackwardInvertsForwardAndPositionZeroIsIdentity) {
  Rng rng(12);
  const int S = int(kRopePos.size()), W = kRopeHeads * kRopeDim;
  auto pos = ids(kRopePos);
  Mat<double> x("x", S, W);
  fill_random(x, rng);
  const Host x0 = to_host(x);
  K::rope_forward<double>(x, pos, kRopeDim, kRopeTheta);
  const Host xf = to_host(x);
  EXPECT_GT(max_abs_diff(xf, x0), 1e-3) << "forward must change rows at position != 0";
  for (int c = 0; c < W; ++c) EXPECT_EQ(xf[1 * W + c], x0[1 * W + c]) << "position 0, column " << c;
  K::rope_backward<double>(x, pos, kRopeDim, kRopeTheta);
  const double e = max_abs_diff(to_host(x), x0);
  note("rope backward(forward(x)) - x (max abs)", e);
  EXPECT_LE(e, 1e-14);
}

TEST(Rope, FloatAgreesWithDouble) {
  Rng rng(60);
  Mat<double> m("m", 2, 4);
  fill_random(m, rng);
  Mat<float> mf = mat_of<float>("mf", 2, 4, to_host(m));
  K::rope_forward<double>(m, ids({0, 5}), 4, kRopeTheta);
  K::rope_forward<float>(mf, ids({0, 5}), 4, kRopeTheta);
  expect_le("rope forward float vs double (max abs)", max_abs_diff(to_host(mf), to_host(m)), 1e-5);
  K::rope_backward<double>(m, ids({0, 5}), 4, kRopeTheta);
  K::rope_backward<float>(mf, ids({0, 5}), 4, kRopeTheta);
  expect_le("rope backward float vs double (max abs)", max_abs_diff(to_host(mf), to_host(m)), 1e-5);
}
