// RMSNorm.  S tokens, d hidden.
//   forward   r_i = (mean_j x_ij^2 + eps)^(-1/2),   y_ij = x_ij r_i w_j         y: [S, d] (=)
//   backward  dx_i += r_i (w * dy_i) - x_i r_i^3 (1/d) sum_j (w_j dy_ij x_ij)   dx: [S, d] (+=)
//             dw_j += sum_i dy_ij x_ij r_i                                      dw: [d]    (+=, master_t)
// r is recomputed in backward, once per token (one pass over x): nothing is saved.
// dx accumulates so the residual stream's gradient can already be in it.
// The backward's dy is scratch: the token pass overwrites it with dy_ij x_ij r_i,
// so that dw is a plain column sum (O(S d), no extra memory, a fixed order).
// Layouts (row_layout.hpp): a thread per token on CPUs, a team per token on GPUs.
#pragma once

#include "compat.hpp"
#include "row_layout.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
KOKKOS_INLINE_FUNCTION accum_t<T> rms_inverse(const T* x, int d, double eps) {
  using A = accum_t<T>;
  A ss = 0;
#ifdef MINILST_HOST_SIMD
#pragma omp simd reduction(+ : ss)
#endif
  for (int j = 0; j < d; ++j) ss += A(x[j]) * A(x[j]);
  return A(1) / compat::sqrt(ss / A(d) + A(eps));
}

// A team's r_i = (mean_j x_ij^2 + eps)^(-1/2) of row xi (every thread of the team gets it).
template <class T>
KOKKOS_INLINE_FUNCTION accum_t<T> rms_inverse(const RowTeam& team, accum_t<T>* slot, const T* xi, int d, double eps) {
  using A = accum_t<T>;
  A ss = 0;
  for (int j = team.team_rank(); j < d; j += kRowTeam) ss += A(xi[j]) * A(xi[j]);
  ss = team_combine(team, slot, ss, SumOf{});
  return A(1) / compat::sqrt(ss / A(d) + A(eps));
}

template <class T>
void rmsnorm_forward(const Mat<T>& y, const Mat<const T>& x, const Vec<const T>& w, double eps,
                     RowLayout layout = row_layout()) {
  using A = accum_t<T>;
  const int d = static_cast<int>(x.extent(1));
  if (layout == RowLayout::team_per_row) {
    Kokkos::parallel_for("rmsnorm_forward_rows", row_teams(x.extent(0)), KOKKOS_LAMBDA(const RowTeam& team) {
      const T* xi = &x(team.league_rank(), 0);
      T* yi = &y(team.league_rank(), 0);
      const T* wp = w.data();
      const A r = rms_inverse<T>(team, team_slots<A>(team), xi, d, eps);
      for (int j = team.team_rank(); j < d; j += kRowTeam) yi[j] = T(A(xi[j]) * r * A(wp[j]));
    });
    return;
  }
  Kokkos::parallel_for("rmsnorm_forward", Kokkos::RangePolicy<ExecSpace>(0, x.extent(0)),
      KOKKOS_LAMBDA(const int i) {
        const T* xi = &x(i, 0);
        T* yi = &y(i, 0);
        const T* wp = w.data();
        const A r = rms_inverse<T>(xi, d, eps);
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
        for (int j = 0; j < d; ++j) yi[j] = T(A(xi[j]) * r * A(wp[j]));
      });
}

namespace detail {
// dx and dy's overwrite of rmsnorm_backward, a team per token.
template <class T>
void rmsnorm_backward_dx_rows(const Mat<T>& dx, const Mat<T>& dy, const Mat<const T>& x, const Vec<const T>& w,
                              double eps) {
  using A = accum_t<T>;
  const int d = static_cast<int>(x.extent(1));
  Kokkos::parallel_for("rmsnorm_backward_dx_rows", row_teams(x.extent(0)), KOKKOS_LAMBDA(const RowTeam& team) {
    const int i = team.league_rank();
    const T* xi = &x(i, 0);
    const T* wp = w.data();
    T* dyi = &dy(i, 0);
    T* dxi = &dx(i, 0);
    A* slot = team_slots<A>(team);
    const A r = rms_inverse<T>(team, slot, xi, d, eps);
    A dot = 0;  // sum_j w_j dy_ij x_ij: every thread has read dy before the combine, before any writes it
    for (int j = team.team_rank(); j < d; j += kRowTeam) dot += A(wp[j]) * A(dyi[j]) * A(xi[j]);
    dot = team_combine(team, slot, dot, SumOf{});
    const A c = r * r * r * dot / A(d);
    for (int j = team.team_rank(); j < d; j += kRowTeam) {
      dxi[j] += r * A(wp[j]) * A(dyi[j]) - A(xi[j]) * c;
      dyi[j] = T(A(dyi[j]) * A(xi[j]) * r);
    }
  });
}
}  // namespace detail

template <class T>
void rmsnorm_backward(const Mat<T>& dx, const Vec<master_t<T>>& dw, const Mat<T>& dy, const Mat<const T>& x,
                      const Vec<const T>& w, double eps, RowLayout layout = row_layout()) {
  using A = accum_t<T>;
  const int S = static_cast<int>(x.extent(0));
  const int d = static_cast<int>(x.extent(1));
  if (layout == RowLayout::team_per_row) detail::rmsnorm_backward_dx_rows(dx, dy, x, w, eps);
  else Kokkos::parallel_for("rmsnorm_backward_dx", Kokkos::RangePolicy<ExecSpace>(0, S),
      KOKKOS_LAMBDA(const int i) {
        const T* xi = &x(i, 0);
        const T* wp = w.data();
        T* dyi = &dy(i, 0);
        T* dxi = &dx(i, 0);
        const A r = rms_inverse<T>(xi, d, eps);
        A dot = 0;  // sum_j w_j dy_ij x_ij
#ifdef MINILST_HOST_SIMD
#pragma omp simd reduction(+ : dot)
#endif
        for (int j = 0; j < d; ++j) dot += A(wp[j]) * A(dyi[j]) * A(xi[j]);
        const A c = r * r * r * dot / A(d);
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
        for (int j = 0; j < d; ++j) {
          dxi[j] += r * A(wp[j]) * A(dyi[j]) - A(xi[j]) * c;
          dyi[j] = T(A(dyi[j]) * A(xi[j]) * r);  // the token's term of dw
        }
      });
  // dw: column sums in blocks of columns, tokens in order (deterministic).
  constexpr int kBlock = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible ? 64 : 1;
  Kokkos::parallel_for("rmsnorm_backward_dw", Kokkos::RangePolicy<ExecSpace>(0, (d + kBlock - 1) / kBlock),
      KOKKOS_LAMBDA(const int b) {
        const int j0 = b * kBlock, n = j0 + kBlock < d ? kBlock : d - j0;
        A acc[kBlock];
        for (int c = 0; c < kBlock; ++c) acc[c] = 0;
        for (int i = 0; i < S; ++i) {
          const T* row = &dy(i, j0);
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
          for (int c = 0; c < n; ++c) acc[c] += A(row[c]);
        }
        for (int c = 0; c < n; ++c) dw(j0 + c) += master_t<T>(acc[c]);
      });
}

}  // namespace minilst::kernels
