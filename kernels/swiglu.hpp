// SwiGLU gate, elementwise on a chunk of C tokens.  g, u, m: [C, I].
//   forward   m = silu(g) * u,  silu(g) = g s,  s = sigmoid(g)               m (=)
//   backward  dg = dm u s (1 + g (1 - s)),  du = dm silu(g)                   dg, du (=)
// dg/du may alias g/u (each element is read before it is written): the MLP
// backward turns its recomputed gate/up buffers into their gradients in place.
// Layouts (row_layout.hpp): on CPUs a thread per token, its I elements in a
// vectorised loop; on GPUs (team_per_row) one thread per element, consecutive
// threads on consecutive elements.
#pragma once

#include "compat.hpp"
#include "row_layout.hpp"
#include "tile_ops.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
KOKKOS_INLINE_FUNCTION accum_t<T> sigmoid(accum_t<T> z) {
  return accum_t<T>(1) / (accum_t<T>(1) + tile::exp(-z));
}

template <class T>
void swiglu_forward(const Mat<T>& m, const Mat<const T>& g, const Mat<const T>& u, RowLayout layout = row_layout()) {
  using A = accum_t<T>;
  const int I = int(g.extent(1));
  if (layout == RowLayout::team_per_row) {
    Kokkos::parallel_for("swiglu_forward_elements", every_element(g.extent(0), I), KOKKOS_LAMBDA(const std::int64_t e) {
      const std::int64_t i = e / I, j = e % I;
      const A gv = g(i, j);
      m(i, j) = T(gv * sigmoid<T>(gv) * A(u(i, j)));
    });
    return;
  }
  Kokkos::parallel_for("swiglu_forward", Kokkos::RangePolicy<ExecSpace>(0, g.extent(0)), KOKKOS_LAMBDA(const int i) {
    const T* gi = &g(i, 0);
    const T* ui = &u(i, 0);
    T* mi = &m(i, 0);
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
    for (int j = 0; j < I; ++j) {
      const A gv = gi[j];
      mi[j] = T(gv * sigmoid<T>(gv) * A(ui[j]));
    }
  });
}

template <class T>
void swiglu_backward(const Mat<T>& dg, const Mat<T>& du, const Mat<const T>& dm, const Mat<const T>& g,
                     const Mat<const T>& u, RowLayout layout = row_layout()) {
  using A = accum_t<T>;
  const int I = int(g.extent(1));
  if (layout == RowLayout::team_per_row) {
    Kokkos::parallel_for("swiglu_backward_elements", every_element(g.extent(0), I), KOKKOS_LAMBDA(const std::int64_t e) {
      const std::int64_t i = e / I, j = e % I;
      const A gv = g(i, j), uv = u(i, j), dmv = dm(i, j);  // dg, du may alias g, u: both read first
      const A s = sigmoid<T>(gv);
      dg(i, j) = T(dmv * uv * s * (A(1) + gv * (A(1) - s)));
      du(i, j) = T(dmv * gv * s);
    });
    return;
  }
  Kokkos::parallel_for("swiglu_backward", Kokkos::RangePolicy<ExecSpace>(0, g.extent(0)), KOKKOS_LAMBDA(const int i) {
    const T* gi = &g(i, 0);
    const T* ui = &u(i, 0);
    const T* dmi = &dm(i, 0);
    T* dgi = &dg(i, 0);
    T* dui = &du(i, 0);
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
    for (int j = 0; j < I; ++j) {  // dg, du may alias g, u: both read first
      const A gv = gi[j], uv = ui[j], dmv = dmi[j];
      const A s = sigmoid<T>(gv);
      dgi[j] = T(dmv * uv * s * (A(1) + gv * (A(1) - s)));
      dui[j] = T(dmv * gv * s);
    }
  });
}

}  // namespace minilst::kernels
