// SwiGLU gate, elementwise on a chunk of C tokens.  g, u, m: [C, I].
//   forward   m = silu(g) * u,  silu(g) = g s,  s = sigmoid(g)               m (=)
//   backward  dg = dm u s (1 + g (1 - s)),  du = dm silu(g)                   dg, du (=)
// dg/du may alias g/u (each element is read before it is written): the MLP
// backward turns its recomputed gate/up buffers into their gradients in place.
#pragma once

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
KOKKOS_INLINE_FUNCTION accum_t<T> sigmoid(accum_t<T> z) {
  return accum_t<T>(1) / (accum_t<T>(1) + compat::exp(-z));
}

template <class T>
void swiglu_forward(const Mat<T>& m, const Mat<const T>& g, const Mat<const T>& u) {
  using A = accum_t<T>;
  Kokkos::parallel_for("swiglu_forward",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {g.extent(0), g.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int j) {
        const A gv = g(i, j);
        m(i, j) = T(gv * sigmoid<T>(gv) * A(u(i, j)));
      });
}

template <class T>
void swiglu_backward(const Mat<T>& dg, const Mat<T>& du, const Mat<const T>& dm,
                     const Mat<const T>& g, const Mat<const T>& u) {
  using A = accum_t<T>;
  Kokkos::parallel_for("swiglu_backward",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {g.extent(0), g.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int j) {
        const A gv = g(i, j), uv = u(i, j), dmv = dm(i, j);
        const A s = sigmoid<T>(gv);
        dg(i, j) = T(dmv * uv * s * (A(1) + gv * (A(1) - s)));
        du(i, j) = T(dmv * gv * s);
      });
}

}  // namespace minilst::kernels
