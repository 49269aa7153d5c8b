// The finite-difference harness of kernel_test_util.hpp (fd_grad, expect_grad_close), which
// every kernel's backward check relies on, checked on its own: it reproduces a known
// gradient, restores its input, and flags a gradient 1% off or one entry off.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.hpp"
#include "kernels/rmsnorm.hpp"

using namespace minilst::kernel_test;
namespace K = minilst::kernels;

TEST(FiniteDifferenceHarness, MatchesAnalyticGradientOfSmoothFunction) {
  // L(x) = sum_ij sin(x_ij) R_ij + (sum x)^2 ; dL/dx = cos(x) R + 2 sum x.
  Rng rng(1);
  Mat<double> x("x", 4, 5);
  fill_random(x, rng, -2, 2);
  const Host R = random_vec(20, rng);
  auto loss = [&] {
    const Host xh = to_host(x);
    double s = 0, t = 0;
    for (std::size_t n = 0; n < xh.size(); ++n) s += std::sin(xh[n]) * R[n], t += xh[n];
    return s + t * t;
  };
  const Host xh = to_host(x);
  double t = 0;
  for (double e : xh) t += e;
  Host g(xh.size());
  for (std::size_t n = 0; n < g.size(); ++n) g[n] = std::cos(xh[n]) * R[n] + 2 * t;
  const Host fd = fd_grad(x, loss);
  expect_grad_close("sin/square", g, fd);
  EXPECT_EQ(to_host(x), xh) << "fd_grad must restore its input";
}

TEST(FiniteDifferenceHarness, FlagsAWrongGradient) {
  // The rmsnorm dx is right; scaled by 1.01, or with one entry off by 1e-4, it must be flagged.
  Rng rng(2);
  const int S = 5, d = 8;
  const double eps = 1e-5;
  Mat<double> x("x", S, d), y("y", S, d), R("R", S, d), dx("dx", S, d);
  Vec<double> w("w", d), dw("dw", d);
  fill_random(x, rng);
  fill_random(w, rng, 0.5, 1.5);
  fill_random(R, rng);
  K::rmsnorm_backward<double>(dx, dw, copy_of(R), x, w, eps);  // its dy is scratch
  const Host Rh = to_host(R);
  auto loss = [&] {
    K::rmsnorm_forward<double>(y, x, w, eps);
    return dot(to_host(y), Rh);
  };
  const Host fd = fd_grad(x, loss), g = to_host(dx);
  EXPECT_LE(rel_err(g, fd), kFdTol);
  const double e_scaled = rel_err(scaled(g, 1.01), fd);
  Host g_one = g;
  g_one[7] += 1e-4;
  const double e_one = rel_err(g_one, fd);
  note("grad*1.01 vs FD (must be > 1e-6)", e_scaled);
  note("grad with one entry +1e-4 vs FD (must be > 1e-6)", e_one);
  EXPECT_GT(e_scaled, kFdTol);
  EXPECT_GT(e_one, kFdTol);
}
