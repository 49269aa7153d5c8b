// Plain reference of rmsnorm.hpp: RMSNorm as the obvious loops, sums in order (no
// vectorised reductions) and dw one column per work item (no blocks of columns);
// selected at run time in place of rmsnorm_forward / rmsnorm_backward, and validated
// against them in tests/kernels/test_rmsnorm.cpp (Rmsnorm.Reference*). Same signatures,
// same semantics.
//   S tokens, d hidden.  x, y, dy, dx: [S, d]  w, dw: [d]
//   forward   r_i = (mean_j x_ij^2 + eps)^(-1/2),   y_ij = x_ij r_i w_j         y: [S, d] (=)
//   backward  dx_i += r_i (w * dy_i) - x_i r_i^3 (1/d) sum_j (w_j dy_ij x_ij)   dx: [S, d] (+=)
//             dw_j += sum_i dy_ij x_ij r_i                                      dw: [d]    (+=)
// As in rmsnorm.hpp, the backward's dy is scratch: the token pass overwrites it with
// dy_ij x_ij r_i, then dw_j is that column's sum over the tokens in order.
#pragma once

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
void rmsnorm_forward_reference(const Mat<T>& y, const Mat<const T>& x, const Vec<const T>& w, double eps) {
  using A = accum_t<T>;
  const int d = static_cast<int>(x.extent(1));
  Kokkos::parallel_for("rmsnorm_forward_reference", Kokkos::RangePolicy<ExecSpace>(0, x.extent(0)),
      KOKKOS_LAMBDA(const int i) {
        A ss = 0;
        for (int j = 0; j < d; ++j) ss += A(x(i, j)) * A(x(i, j));
        const A r = A(1) / compat::sqrt(ss / A(d) + A(eps));
        for (int j = 0; j < d; ++j) y(i, j) = T(A(x(i, j)) * r * A(w(j)));
      });
}

template <class T>
void rmsnorm_backward_reference(const Mat<T>& dx, const Vec<master_t<T>>& dw, const Mat<T>& dy, const Mat<const T>& x,
                                const Vec<const T>& w, double eps) {
  using A = accum_t<T>;
  const int S = static_cast<int>(x.extent(0));
  const int d = static_cast<int>(x.extent(1));
  Kokkos::parallel_for("rmsnorm_backward_reference_dx", Kokkos::RangePolicy<ExecSpace>(0, S),
      KOKKOS_LAMBDA(const int i) {
        A ss = 0;
        for (int j = 0; j < d; ++j) ss += A(x(i, j)) * A(x(i, j));
        const A r = A(1) / compat::sqrt(ss / A(d) + A(eps));
        A dot = 0;  // sum_j w_j dy_ij x_ij
        for (int j = 0; j < d; ++j) dot += A(w(j)) * A(dy(i, j)) * A(x(i, j));
        const A c = r * r * r * dot / A(d);
        for (int j = 0; j < d; ++j) {
          dx(i, j) += r * A(w(j)) * A(dy(i, j)) - A(x(i, j)) * c;
          dy(i, j) = T(A(dy(i, j)) * A(x(i, j)) * r);  // the token's term of dw
        }
      });
  Kokkos::parallel_for("rmsnorm_backward_reference_dw", Kokkos::RangePolicy<ExecSpace>(0, d),
      KOKKOS_LAMBDA(const int j) {
        A acc = 0;
        for (int i = 0; i < S; ++i) acc += A(dy(i, j));
        dw(j) += master_t<T>(acc);
      });
}

}  // namespace minilst::kernels
