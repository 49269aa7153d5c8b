// adamw (kernels/adamw.hpp): the AdamW update with decoupled weight decay.
//  * Two steps against a scalar loop (p, m, v), a parameter with no gradient only decays; in
//    double.
//  * The float instantiation runs and leaves finite parameters.
// Each check prints its observed error as "[err] <what> = <value>".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernel_test_util.hpp"
#include "kernels/adamw.hpp"

using namespace minilst::kernel_test;
namespace K = minilst::kernels;

TEST(Adamw, TwoStepsMatchScalarReference) {
  Rng rng(50);
  const int n = 9;
  K::AdamWHyper hp;
  hp.lr = 1e-2, hp.beta1 = 0.8, hp.beta2 = 0.9, hp.eps = 1e-6, hp.weight_decay = 0.05;
  Vec<double> p("p", n), g("g", n), m("m", n), v("v", n);
  fill_random(p, rng, -2, 2);
  Host ph = to_host(p), mh(n, 0.0), vh(n, 0.0);
  const Host p_init = ph;
  for (long step = 1; step <= 2; ++step) {
    Host gh = random_vec(n, rng);
    gh[4] = 0.0;  // a parameter with no gradient only decays
    from_host(g, gh);
    K::adamw_update<double>(p, g, m, v, step, hp);
    const double c1 = 1.0 - std::pow(hp.beta1, double(step)), c2 = 1.0 - std::pow(hp.beta2, double(step));
    for (int i = 0; i < n; ++i) {
      mh[i] = hp.beta1 * mh[i] + (1 - hp.beta1) * gh[i];
      vh[i] = hp.beta2 * vh[i] + (1 - hp.beta2) * gh[i] * gh[i];
      ph[i] -= hp.lr * ((mh[i] / c1) / (std::sqrt(vh[i] / c2) + hp.eps) + hp.weight_decay * ph[i]);
    }
    const double ep = max_abs_diff(to_host(p), ph), em = max_abs_diff(to_host(m), mh),
                 ev = max_abs_diff(to_host(v), vh);
    note("adamw step " + std::to_string(step) + " p/m/v vs scalar (max abs)", std::max({ep, em, ev}));
    EXPECT_LE(ep, 1e-14) << "step " << step;
    EXPECT_LE(em, 1e-14) << "step " << step;
    EXPECT_LE(ev, 1e-14) << "step " << step;
  }
  // Decoupled weight decay: with g = 0 throughout, p shrinks by exactly (1 - lr wd) per step.
  const double decay = 1 - hp.lr * hp.weight_decay;
  EXPECT_NEAR(to_host(p)[4], p_init[4] * decay * decay, 1e-15);
}

TEST(Adamw, FloatInstantiationLeavesFiniteParameters) {
  Rng rng(60);
  Vec<float> pf("p", 4), gvf("g", 4), mvf("m", 4), vvf("v", 4);
  fill_random(pf, rng);
  fill_random(gvf, rng);
  K::adamw_update<float>(pf, gvf, mvf, vvf, 1, K::AdamWHyper{});
  for (double e : to_host(pf)) EXPECT_TRUE(std::isfinite(e));
}
