// SwiGLU gate, elementwise on a chunk of C tokens.  g, u, m: [C, I].
//   forward   m = silu(g) * u,  silu(g) = g s,  s = sigmoid(g)               m (=)
//   backward  dg = dm u s (1 + g (1 - s)),  du = dm silu(g)                   dg, du (=)
// dg/du may alias g/u (each element is read before it is written): the MLP
// backward turns its recomputed gate/up buffers into their gradients in place.
#pragma once

#include "compat.hpp"
#include "tile_ops.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
KOKKOS_INLINE_FUNCTION accum_t<T> sigmoid(accum_t<T> z) {
  return accum_t<T>(1) / (accum_t<T>(1) + tile::exp(-z));
}

// One token (row) per iteration, its I elements in a vectorised loop.
template <class T>
void swiglu_forward(const Mat<T>& m, const Mat<const T>& g, const Mat<const T>& u) {
  using A = accum_t<T>;
  const int I = int(g.extent(1));
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
void swiglu_backward(const Mat<T>& dg, const Mat<T>& du, const Mat<const T>& dm,
                     const Mat<const T>& g, const Mat<const T>& u) {
  using A = accum_t<T>;
  const int I = int(g.extent(1));
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
