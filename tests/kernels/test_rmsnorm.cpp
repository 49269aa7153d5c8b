// rmsnorm (kernels/rmsnorm.hpp, rmsnorm_reference.hpp): y = x / sqrt(mean(x^2) + eps) * w.
//  * The forward against a naive loop; the backward (dx, dw) against finite differences; dx and
//    dw accumulate (+=); in double.
//  * The reference twin against the optimised kernels, double and float: d = 37 and 150 (more
//    than the optimised dw's 64-column blocks), += into dx and dw, dy as scratch.
//  * The float instantiation against double.
// Each check prints its observed error as "[err] <what> = <value>".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernel_test_util.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rmsnorm_reference.hpp"

using namespace minilst::kernel_test;
namespace K = minilst::kernels;

namespace {
struct RmsProblem {
  int S = 5, d = 8;
  double eps = 1e-5;
  Mat<double> x{"x", 5, 8}, y{"y", 5, 8}, R{"R", 5, 8};
  Vec<double> w{"w", 8};
  explicit RmsProblem(Rng& rng) {
    fill_random(x, rng);
    fill_random(w, rng, 0.5, 1.5);
    fill_random(R, rng);
  }
};
}  // namespace

TEST(Rmsnorm, ForwardMatchesNaive) {
  Rng rng(7);
  RmsProblem P(rng);
  K::rmsnorm_forward<double>(P.y, P.x, P.w, P.eps);
  const Host xh = to_host(P.x), wh = to_host(P.w), yh = to_host(P.y);
  Host ref(xh.size());
  for (int i = 0; i < P.S; ++i) {
    double ss = 0;
    for (int j = 0; j < P.d; ++j) ss += xh[i * P.d + j] * xh[i * P.d + j];
    const double r = 1.0 / std::sqrt(ss / P.d + P.eps);
    for (int j = 0; j < P.d; ++j) ref[i * P.d + j] = xh[i * P.d + j] * r * wh[j];
  }
  const double e = max_abs_diff(yh, ref);
  note("rmsnorm forward vs naive (max abs)", e);
  EXPECT_LE(e, 1e-14);
}

TEST(Rmsnorm, BackwardMatchesFiniteDifferences) {
  Rng rng(8);
  RmsProblem P(rng);
  Mat<double> dx("dx", P.S, P.d);
  Vec<double> dw("dw", P.d);
  K::rmsnorm_backward<double>(dx, dw, copy_of(P.R), P.x, P.w, P.eps);
  const Host Rh = to_host(P.R);
  auto loss = [&] {
    K::rmsnorm_forward<double>(P.y, P.x, P.w, P.eps);
    return dot(to_host(P.y), Rh);
  };
  expect_grad_close("rmsnorm dx", to_host(dx), fd_grad(P.x, loss));
  expect_grad_close("rmsnorm dw", to_host(dw), fd_grad(P.w, loss));
}

TEST(Rmsnorm, BackwardAccumulatesIntoDxAndDw) {
  Rng rng(9);
  RmsProblem P(rng);
  Mat<double> dx0("dx0", P.S, P.d), dx("dx", P.S, P.d);
  Vec<double> dw0("dw0", P.d), dw("dw", P.d);
  K::rmsnorm_backward<double>(dx0, dw0, copy_of(P.R), P.x, P.w, P.eps);  // from zero
  fill_random(dx, rng);
  fill_random(dw, rng);
  const Host dx_init = to_host(dx), dw_init = to_host(dw);
  K::rmsnorm_backward<double>(dx, dw, copy_of(P.R), P.x, P.w, P.eps);
  Host ex = to_host(dx0), ew = to_host(dw0);
  for (std::size_t n = 0; n < ex.size(); ++n) ex[n] += dx_init[n];
  for (std::size_t n = 0; n < ew.size(); ++n) ew[n] += dw_init[n];
  EXPECT_LE(max_abs_diff(to_host(dx), ex), 1e-15);
  EXPECT_LE(max_abs_diff(to_host(dw), ew), 1e-15);
}

// =============================================================================================
// The reference twin (kernels/rmsnorm_reference.hpp) against the optimised kernels.

namespace {
template <class T>
void check_rmsnorm_reference(double tolerance, K::RowLayout layout) {
  Rng rng(800);
  const double eps = 1e-5;
  for (const int d : {37, 150}) {  // 150: more than the optimised dw's 64-column blocks, a partial last one
    const int S = 9;
    const std::string tag = "rmsnorm " + type_name<T>() + " d=" + std::to_string(d) +
                            (layout == K::RowLayout::team_per_row ? " (team per row)" : "");
    const Host x = random_vec(std::size_t(S) * d, rng, -2, 2), w = random_vec(d, rng, 0.5, 1.5),
               dy = random_vec(std::size_t(S) * d, rng), dx0 = random_vec(std::size_t(S) * d, rng),
               dw0 = random_vec(d, rng);
    Mat<T> X = mat_of<T>("x", S, d, x), y_ref("y", S, d), y_opt("y", S, d);
    Vec<T> W = vec_of<T>("w", w);
    K::rmsnorm_forward_reference<T>(y_ref, X, W, eps);
    K::rmsnorm_forward<T>(y_opt, X, W, eps, layout);
    expect_le(tag + ": y ref vs opt (rel)", rel_err(to_host(y_ref), to_host(y_opt)), tolerance);
    // dx and dw accumulate (+=) onto what is there; dy is scratch (overwritten with dy x r).
    Mat<T> dx_ref = mat_of<T>("dx", S, d, dx0), dx_opt = mat_of<T>("dx", S, d, dx0);
    Vec<T> dw_ref = vec_of<T>("dw", dw0), dw_opt = vec_of<T>("dw", dw0);
    Mat<T> dy_ref = mat_of<T>("dy", S, d, dy), dy_opt = mat_of<T>("dy", S, d, dy);
    K::rmsnorm_backward_reference<T>(dx_ref, dw_ref, dy_ref, X, W, eps);
    K::rmsnorm_backward<T>(dx_opt, dw_opt, dy_opt, X, W, eps, layout);
    auto minus = [](Host a, const Host& b) {
      for (std::size_t n = 0; n < a.size(); ++n) a[n] -= b[n];
      return a;
    };
    // The increments, compared on their own scale (the initial values cancel).
    expect_le(tag + ": dx increment ref vs opt (rel)",
              rel_err(minus(to_host(dx_ref), dx0), minus(to_host(dx_opt), dx0)), tolerance * 100);
    expect_le(tag + ": dw increment ref vs opt (rel)",
              rel_err(minus(to_host(dw_ref), dw0), minus(to_host(dw_opt), dw0)), tolerance * 100);
    expect_le(tag + ": dx, dw ref vs opt (rel)",
              std::max(rel_err(to_host(dx_ref), to_host(dx_opt)), rel_err(to_host(dw_ref), to_host(dw_opt))),
              tolerance);
    expect_le(tag + ": dy scratch ref vs opt (rel)", rel_err(to_host(dy_ref), to_host(dy_opt)), tolerance);
  }
}
}  // namespace

TEST(Rmsnorm, ReferenceMatchesOptimisedAccumulatingIntoDxDwDouble) {
  check_rmsnorm_reference<double>(1e-14, K::RowLayout::thread_per_row);
}
TEST(Rmsnorm, ReferenceMatchesOptimisedAccumulatingIntoDxDwFloat) {
  check_rmsnorm_reference<float>(1e-6, K::RowLayout::thread_per_row);
}
// The GPU's layout (a team per token, team reductions), run here on the host backend.
TEST(Rmsnorm, ReferenceMatchesTeamPerRowDoubleAndFloat) {
  check_rmsnorm_reference<double>(1e-14, K::RowLayout::team_per_row);
  check_rmsnorm_reference<float>(1e-6, K::RowLayout::team_per_row);
}

// =============================================================================================
// float

TEST(Rmsnorm, FloatAgreesWithDouble) {
  Rng rng(60);
  const int S = 5, d = 16;
  Mat<double> x("x", S, d), y("y", S, d), R("R", S, d), dx("dx", S, d);
  Vec<double> w("w", d), dw("dw", d);
  fill_random(x, rng);
  fill_random(w, rng, 0.5, 1.5);
  fill_random(R, rng);
  Mat<float> xf("xf", S, d), yf("yf", S, d), Rf("Rf", S, d), dxf("dxf", S, d);
  Vec<float> wf("wf", d), dwf("dwf", d);
  from_host(xf, to_host(x));
  from_host(wf, to_host(w));
  from_host(Rf, to_host(R));
  K::rmsnorm_forward<double>(y, x, w, 1e-5);
  K::rmsnorm_forward<float>(yf, xf, wf, 1e-5);
  K::rmsnorm_backward<double>(dx, dw, copy_of(R), x, w, 1e-5);
  K::rmsnorm_backward<float>(dxf, dwf, copy_of(Rf), xf, wf, 1e-5);
  const double ey = max_abs_diff(to_host(yf), to_host(y));
  const double eg = std::max(rel_err(to_host(dxf), to_host(dx)), rel_err(to_host(dwf), to_host(dw)));
  note("rmsnorm float vs double y (max abs)", ey);
  note("rmsnorm float vs double dx/dw (rel)", eg);
  EXPECT_LE(ey, 1e-5);
  EXPECT_LE(eg, 1e-5);
}
