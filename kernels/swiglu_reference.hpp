// Plain reference of swiglu.hpp: the SwiGLU gate element by element, sigmoid with the
// math library's exp (not tile::exp's vectorised polynomial); selected at run time in
// place of swiglu_forward / swiglu_backward, and validated against them in
// tests/kernels/test_swiglu.cpp (Swiglu.Reference*). Same signatures, same semantics.
//   C tokens of a chunk, I MLP intermediate.  g, u, m, dm, dg, du: [C, I].
//   forward   m = silu(g) * u,  silu(g) = g s,  s = sigmoid(g) = 1 / (1 + e^-g)   m (=)
//   backward  dg = dm u s (1 + g (1 - s)),  du = dm silu(g)                      dg, du (=)
// dg/du may alias g/u (each element is read before it is written). One work item per element.
#pragma once

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
void swiglu_forward_reference(const Mat<T>& m, const Mat<const T>& g, const Mat<const T>& u) {
  using A = accum_t<T>;
  Kokkos::parallel_for("swiglu_forward_reference",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {g.extent(0), g.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int j) {
        const A gv = g(i, j);
        const A s = A(1) / (A(1) + compat::exp(-gv));
        m(i, j) = T(gv * s * A(u(i, j)));
      });
}

template <class T>
void swiglu_backward_reference(const Mat<T>& dg, const Mat<T>& du, const Mat<const T>& dm,
                               const Mat<const T>& g, const Mat<const T>& u) {
  using A = accum_t<T>;
  Kokkos::parallel_for("swiglu_backward_reference",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {g.extent(0), g.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int j) {
        const A gv = g(i, j), uv = u(i, j), dmv = dm(i, j);  // read first: dg, du may alias g, u
        const A s = A(1) / (A(1) + compat::exp(-gv));
        dg(i, j) = T(dmv * uv * s * (A(1) + gv * (A(1) - s)));
        du(i, j) = T(dmv * gv * s);
      });
}

}  // namespace minilst::kernels
