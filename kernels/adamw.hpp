// AdamW update over a flat parameter buffer (all parameters are one contiguous
// allocation, so the optimizer is one kernel). n parameters; p, g, m, v: [n].
//   m = b1 m + (1-b1) g ;  v = b2 v + (1-b2) g^2
//   p -= lr ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd p )      t = step >= 1
// p, m, v are updated in place; g is read only; copy (optional) := p rounded.
#pragma once

#include <cmath>

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

struct AdamWHyper {
  double lr = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

// The update on any execution space (`space`: the device, or host threads for
// optimizer offload); p, m, v, g and copy are views that space can access.
// copy (mixed precision, or offload's outgoing weights): the updated p rounded to
// the copy's type, in the same pass; empty: none.
template <class Space, class PV, class GV, class MV, class CV>
void adamw_update_on(const Space& space, const PV& p, const GV& g, const MV& m, const MV& v, long step,
                     const AdamWHyper& hp, const CV& copy) {
  using T = typename PV::non_const_value_type;
  using C = typename CV::non_const_value_type;
  using A = accum_t<T>;
  const A b1 = hp.beta1, b2 = hp.beta2, lr = hp.lr, eps = hp.eps, wd = hp.weight_decay;
  const A c1 = A(1) / A(1 - std::pow(hp.beta1, double(step)));
  const A c2 = A(1) / A(1 - std::pow(hp.beta2, double(step)));
  const auto update = [=] KOKKOS_FUNCTION(const std::int64_t i) {  // returns the updated p(i)
    const A gi = g(i);
    const A mi = b1 * A(m(i)) + (A(1) - b1) * gi;
    const A vi = b2 * A(v(i)) + (A(1) - b2) * gi * gi;
    m(i) = T(mi);
    v(i) = T(vi);
    const A pi = A(p(i)) - lr * ((mi * c1) / (compat::sqrt(vi * c2) + eps) + wd * A(p(i)));
    p(i) = T(pi);
    return pi;
  };
  const Kokkos::RangePolicy<Space, Kokkos::IndexType<std::int64_t>> all(space, 0, p.extent(0));
  if (copy.extent(0) == 0)  // two loops, so that neither tests per element
    Kokkos::parallel_for("adamw_update", all, KOKKOS_LAMBDA(const std::int64_t i) { update(i); });
  else
    Kokkos::parallel_for("adamw_update", all, KOKKOS_LAMBDA(const std::int64_t i) { copy(i) = C(update(i)); });
}

// On the device, over flat buffers (copy: the bf16 weights the kernels read; empty: none).
template <class T, class C = T>
void adamw_update(const Vec<T>& p, const Vec<const T>& g, const Vec<T>& m, const Vec<T>& v, long step,
                  const AdamWHyper& hp, const Vec<C>& copy = Vec<C>()) {
  adamw_update_on(ExecSpace(), p, g, m, v, step, hp, copy);
}

}  // namespace minilst::kernels
