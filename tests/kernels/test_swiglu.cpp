// swiglu (kernels/swiglu.hpp, swiglu_reference.hpp): m = silu(g) * u.
//  * The forward against a naive loop, finite for extreme gates; the backward (dg, du) against
//    finite differences; the backward in place on g and u (as the MLP calls it) equals out of
//    place; in double.
//  * The reference twin against the optimised kernels, double and float: ordinary gates and
//    gates where the sigmoid saturates both ways, in place.
//  * The float instantiation (in place, as the MLP calls it) against double.
// Each check prints its observed error as "[err] <what> = <value>".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "kernel_test_util.hpp"
#include "kernels/swiglu.hpp"
#include "kernels/swiglu_reference.hpp"

using namespace minilst::kernel_test;
namespace K = minilst::kernels;

namespace {
Host naive_swiglu(const Host& g, const Host& u) {
  Host m(g.size());
  for (std::size_t n = 0; n < g.size(); ++n) m[n] = g[n] / (1.0 + std::exp(-g[n])) * u[n];
  return m;
}
}  // namespace

TEST(Swiglu, ForwardMatchesNaiveAndIsFiniteForExtremeGates) {
  Rng rng(13);
  Mat<double> g("g", 4, 6), u("u", 4, 6), m("m", 4, 6);
  fill_random(g, rng, -4, 4);
  fill_random(u, rng);
  K::swiglu_forward<double>(m, g, u);
  const double e = max_abs_diff(to_host(m), naive_swiglu(to_host(g), to_host(u)));
  note("swiglu forward vs naive (max abs)", e);
  EXPECT_LE(e, 1e-15);
  Host gx = to_host(g);
  gx[0] = 800, gx[1] = -800, gx[2] = 40, gx[3] = -40;
  from_host(g, gx);
  K::swiglu_forward<double>(m, g, u);
  Mat<double> dg("dg", 4, 6), du("du", 4, 6);
  K::swiglu_backward<double>(dg, du, u, g, u);
  for (const Host& out : {to_host(m), to_host(dg), to_host(du)})
    for (double e2 : out) EXPECT_TRUE(std::isfinite(e2));
}

TEST(Swiglu, BackwardMatchesFiniteDifferences) {
  Rng rng(14);
  Mat<double> g("g", 4, 6), u("u", 4, 6), m("m", 4, 6), R("R", 4, 6), dg("dg", 4, 6), du("du", 4, 6);
  fill_random(g, rng, -4, 4);
  fill_random(u, rng);
  fill_random(R, rng);
  K::swiglu_backward<double>(dg, du, R, g, u);
  const Host Rh = to_host(R);
  auto loss = [&] {
    K::swiglu_forward<double>(m, g, u);
    return dot(to_host(m), Rh);
  };
  expect_grad_close("swiglu dg", to_host(dg), fd_grad(g, loss));
  expect_grad_close("swiglu du", to_host(du), fd_grad(u, loss));
}

TEST(Swiglu, BackwardInPlaceOnGateAndUpMatchesOutOfPlace) {
  Rng rng(15);
  Mat<double> g("g", 4, 6), u("u", 4, 6), R("R", 4, 6), dg("dg", 4, 6), du("du", 4, 6);
  fill_random(g, rng, -4, 4);
  fill_random(u, rng);
  fill_random(R, rng);
  K::swiglu_backward<double>(dg, du, R, g, u);
  Mat<double> g2 = copy_of(g), u2 = copy_of(u);
  K::swiglu_backward<double>(g2, u2, R, g2, u2);  // dg aliases g, du aliases u (as the MLP does)
  EXPECT_EQ(to_host(g2), to_host(dg));
  EXPECT_EQ(to_host(u2), to_host(du));
}

// =============================================================================================
// The reference twin (kernels/swiglu_reference.hpp) against the optimised kernels.

namespace {
template <class T>
void check_swiglu_reference(double tolerance, K::RowLayout layout) {
  Rng rng(700);
  const int C = 7, I = 45;
  // Ordinary gates, then gates where the sigmoid saturates both ways (compared on their own:
  // their large products would dominate the norm of the ordinary ones).
  Host ordinary = random_vec(std::size_t(C) * I, rng, -4, 4), extreme = ordinary;
  const double big[] = {-1000, -100, -30, -15, 15, 30, 100, 1000};
  for (std::size_t n = 0; n < extreme.size(); ++n) extreme[n] = big[n % 8] * (1 + 0.01 * ordinary[n]);
  const Host u = random_vec(ordinary.size(), rng), dm = random_vec(ordinary.size(), rng);
  for (const auto& [name, g] : {std::make_pair("ordinary gates", ordinary), std::make_pair("extreme gates", extreme)}) {
    const std::string tag = "swiglu " + type_name<T>() + " " + name +
                            (layout == K::RowLayout::team_per_row ? " (an element per thread)" : "");
    Mat<T> G = mat_of<T>("g", C, I, g), U = mat_of<T>("u", C, I, u), DM = mat_of<T>("dm", C, I, dm);
    Mat<T> m_ref("m", C, I), m_opt("m", C, I);
    K::swiglu_forward_reference<T>(m_ref, G, U);
    K::swiglu_forward<T>(m_opt, G, U, layout);
    expect_le(tag + ": m ref vs opt (rel)", rel_err(to_host(m_ref), to_host(m_opt)), tolerance);
    Mat<T> dg_ref("dg", C, I), du_ref("du", C, I), dg_opt("dg", C, I), du_opt("du", C, I);
    K::swiglu_backward_reference<T>(dg_ref, du_ref, DM, G, U);
    K::swiglu_backward<T>(dg_opt, du_opt, DM, G, U, layout);
    expect_le(tag + ": dg/du ref vs opt (rel, worst)",
              std::max(rel_err(to_host(dg_ref), to_host(dg_opt)), rel_err(to_host(du_ref), to_host(du_opt))),
              tolerance);
    // In place (dg = g, du = u) as the MLP backward calls it: the same as out of place.
    Mat<T> G2 = mat_of<T>("g", C, I, g), U2 = mat_of<T>("u", C, I, u);
    K::swiglu_backward_reference<T>(G2, U2, DM, G2, U2);
    EXPECT_EQ(to_host(G2), to_host(dg_ref)) << tag << ": in place dg";
    EXPECT_EQ(to_host(U2), to_host(du_ref)) << tag << ": in place du";
    Mat<T> G3 = mat_of<T>("g", C, I, g), U3 = mat_of<T>("u", C, I, u);
    K::swiglu_backward<T>(G3, U3, DM, G3, U3, layout);
    EXPECT_EQ(to_host(G3), to_host(dg_opt)) << tag << ": optimised in place dg";
    EXPECT_EQ(to_host(U3), to_host(du_opt)) << tag << ": optimised in place du";
    for (const Host& x : {to_host(m_ref), to_host(dg_ref), to_host(du_ref)})
      for (double e : x) EXPECT_TRUE(std::isfinite(e)) << tag;
  }
}
}  // namespace

TEST(Swiglu, ReferenceMatchesOptimisedExtremeGatesAndInPlaceDouble) {
  check_swiglu_reference<double>(1e-14, K::RowLayout::thread_per_row);
}
TEST(Swiglu, ReferenceMatchesOptimisedExtremeGatesAndInPlaceFloat) {
  check_swiglu_reference<float>(1e-6, K::RowLayout::thread_per_row);
}
// The GPU's layout (a thread per element), run here on the host backend.
TEST(Swiglu, ReferenceMatchesElementPerThreadDoubleAndFloat) {
  check_swiglu_reference<double>(1e-14, K::RowLayout::team_per_row);
  check_swiglu_reference<float>(1e-6, K::RowLayout::team_per_row);
}

// =============================================================================================
// float

TEST(Swiglu, FloatAgreesWithDouble) {
  Rng rng(60);
  Mat<double> g("g", 2, 4), u("u", 2, 4), m("m", 2, 4);
  fill_random(g, rng);
  fill_random(u, rng);
  Mat<float> gf = mat_of<float>("gf", 2, 4, to_host(g)), uf = mat_of<float>("uf", 2, 4, to_host(u)), mf("mf", 2, 4);
  K::swiglu_forward<double>(m, g, u);
  K::swiglu_forward<float>(mf, gf, uf);
  K::swiglu_backward<double>(g, u, m, g, u);  // in place, the forward's output as the cotangent
  K::swiglu_backward<float>(gf, uf, mf, gf, uf);
  const double e = std::max({max_abs_diff(to_host(mf), to_host(m)), max_abs_diff(to_host(gf), to_host(g)),
                             max_abs_diff(to_host(uf), to_host(u))});
  expect_le("swiglu float vs double m/dg/du (max abs)", e, 1e-5);
}
