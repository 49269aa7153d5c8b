// GEMM rates measured in the running process.
//   measured_gemm_gflops<T>  the dense GEMM rate the run's precision gets on this process's
//                            execution space: C = A B on n x n matrices through the run's
//                            chosen path (gemm_optimized), the best of `repeats` timed calls
//                            after one warm-up call. MFU is measured against it (a machine's
//                            own peak for the run's arithmetic, measured in the same run).
//                            2 n^3 FLOPs per call.
//   bf16_path_gflops         one bf16 path's rate on a 384 x 1024 x 768 product with a bf16
//                            C, best of three: the probe that chooses a path where the deck
//                            says auto (src/core/kernel_choice.cpp).
#pragma once

#include <Kokkos_Core.hpp>

#include <algorithm>

#include "gemm.hpp"
#include "kernel_choice.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
double measured_gemm_gflops(const KernelChoice& choice, int n = 1024, int repeats = 3) {
  Mat<T> a("gemm_rate_a", n, n), b("gemm_rate_b", n, n), c("gemm_rate_c", n, n);
  Kokkos::deep_copy(a, T(0.01f));  // normal values (no denormal slow paths)
  Kokkos::deep_copy(b, T(0.02f));
  double best = 0;
  for (int r = 0; r <= repeats; ++r) {
    ExecSpace().fence();
    Kokkos::Timer timer;
    gemm_optimized(choice, Op::N, Op::N, T(1), a, b, T(0), c);
    ExecSpace().fence();
    const double s = timer.seconds();
    if (r > 0 && s > 0) best = std::max(best, 2.0 * double(n) * n * n / s / 1e9);
  }
  return best;
}

inline double bf16_path_gflops(GemmPath path) {
  constexpr int m = 384, n = 1024, k = 768;
  Mat<bf16> a("bf16_gemm_probe_a", m, k), b("bf16_gemm_probe_b", k, n), c("bf16_gemm_probe_c", m, n);
  Kokkos::deep_copy(a, bf16(0.5f));
  Kokkos::deep_copy(b, bf16(0.25f));
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    ExecSpace().fence();
    Kokkos::Timer timer;
    gemm_mixed(path, Op::N, Op::N, 1.0f, a, b, 0.0f, c);
    ExecSpace().fence();
    best = std::max(best, 2.0 * m * n * k / timer.seconds() / 1e9);
  }
  return best;
}

}  // namespace minilst::kernels
