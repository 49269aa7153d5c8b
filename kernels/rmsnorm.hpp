// RMSNorm.  S tokens, d hidden.
//   forward   r_i = (mean_j x_ij^2 + eps)^(-1/2),   y_ij = x_ij r_i w_j         y: [S, d] (=)
//   backward  dx_i += r_i (w * dy_i) - x_i r_i^3 (1/d) sum_j (w_j dy_ij x_ij)   dx: [S, d] (+=)
//             dw_j += sum_i dy_ij x_ij r_i                                      dw: [d]    (+=)
// r is recomputed in backward (one pass over x): nothing is saved.
// dx accumulates so the residual stream's gradient can already be in it.
#pragma once

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
KOKKOS_INLINE_FUNCTION accum_t<T> rms_inverse(const Mat<const T>& x, int i, double eps) {
  using A = accum_t<T>;
  const int d = static_cast<int>(x.extent(1));
  A ss = 0;
  for (int j = 0; j < d; ++j) ss += A(x(i, j)) * A(x(i, j));
  return A(1) / compat::sqrt(ss / A(d) + A(eps));
}

template <class T>
void rmsnorm_forward(const Mat<T>& y, const Mat<const T>& x, const Vec<const T>& w, double eps) {
  const int d = static_cast<int>(x.extent(1));
  Kokkos::parallel_for("rmsnorm_forward", Kokkos::RangePolicy<ExecSpace>(0, x.extent(0)),
      KOKKOS_LAMBDA(const int i) {
        const auto r = rms_inverse<T>(x, i, eps);
        for (int j = 0; j < d; ++j) y(i, j) = T(x(i, j) * r * w(j));
      });
}

template <class T>
void rmsnorm_backward(const Mat<T>& dx, const Vec<T>& dw, const Mat<const T>& dy,
                      const Mat<const T>& x, const Vec<const T>& w, double eps) {
  using A = accum_t<T>;
  const int S = static_cast<int>(x.extent(0));
  const int d = static_cast<int>(x.extent(1));
  Kokkos::parallel_for("rmsnorm_backward_dx", Kokkos::RangePolicy<ExecSpace>(0, S),
      KOKKOS_LAMBDA(const int i) {
        const A r = rms_inverse<T>(x, i, eps);
        A dot = 0;  // sum_j w_j dy_ij x_ij
        for (int j = 0; j < d; ++j) dot += A(w(j)) * A(dy(i, j)) * A(x(i, j));
        const A c = r * r * r * dot / A(d);
        for (int j = 0; j < d; ++j) dx(i, j) += T(r * A(w(j)) * A(dy(i, j)) - A(x(i, j)) * c);
      });
  // dw: parallel over columns, serial over tokens (deterministic order).
  Kokkos::parallel_for("rmsnorm_backward_dw", Kokkos::RangePolicy<ExecSpace>(0, d),
      KOKKOS_LAMBDA(const int j) {
        A acc = 0;
        for (int i = 0; i < S; ++i) acc += A(dy(i, j)) * A(x(i, j)) * rms_inverse<T>(x, i, eps);
        dw(j) += T(acc);
      });
}

}  // namespace minilst::kernels
