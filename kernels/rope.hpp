// Rotary position embedding, "rotate-half" pairing, applied in place.
// x: [S, n*h] (n heads of dim h), pos: [S] rotary positions: a token's position within
// its document (its global position when the sequence is one document).
//   theta_j = rope_theta^(-2j/h), a = pos_i theta_j, for j < h/2:
//   forward   x'[j] = x[j] cos a - x[j+h/2] sin a ;  x'[j+h/2] = x[j+h/2] cos a + x[j] sin a
//   backward  the transpose: the same rotation by -a, applied in place to dx.
// Angles are computed in double: pos * theta_j loses digits in fp32 at long S.
#pragma once

#include "compat.hpp"
#include "types.hpp"

namespace minilst::kernels {

namespace detail {
template <class T>
void rope_rotate(const char* label, const Mat<T>& x, const Vec<const std::int64_t>& pos,
                 int head_dim, double rope_theta, double sign) {
  const int half = head_dim / 2;
  const int n_heads = static_cast<int>(x.extent(1)) / head_dim;
  Kokkos::parallel_for(label,
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {x.extent(0), std::size_t(half)}),
      KOKKOS_LAMBDA(const int i, const int j) {
        const double inv_freq = compat::pow(rope_theta, -2.0 * j / head_dim);
        const double angle = sign * double(pos(i)) * inv_freq;
        const double c = compat::cos(angle), s = compat::sin(angle);
        for (int n = 0; n < n_heads; ++n) {
          const int lo = n * head_dim + j, hi = lo + half;
          const double a = x(i, lo), b = x(i, hi);
          x(i, lo) = T(a * c - b * s);
          x(i, hi) = T(b * c + a * s);
        }
      });
}
}  // namespace detail

template <class T>
void rope_forward(const Mat<T>& x, const Vec<const std::int64_t>& pos, int head_dim, double rope_theta) {
  detail::rope_rotate<T>("rope_forward", x, pos, head_dim, rope_theta, +1.0);
}

template <class T>
void rope_backward(const Mat<T>& dx, const Vec<const std::int64_t>& pos, int head_dim, double rope_theta) {
  detail::rope_rotate<T>("rope_backward", dx, pos, head_dim, rope_theta, -1.0);
}

}  // namespace minilst::kernels
