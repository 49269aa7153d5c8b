// GEMM rates measured in the running process.
//   measured_gemm_gflops<T>  the dense GEMM rate the run's precision gets on this process's
//                            execution space: C = A B on n x n matrices through the run's
//                            chosen path (gemm_optimized), the best of `repeats` timed calls
//                            after one warm-up call. MFU is measured against it (a machine's
//                            own peak for the run's arithmetic, measured in the same run).
//                            2 n^3 FLOPs per call.
//   probe_gemm_gflops<T>     one path's rate on a 512 x 2048 x 1024 product in T (C in T),
//                            best of three after a warm-up: the probe that chooses a path
//                            where the deck says auto (src/core/kernel_choice.cpp).
#pragma once

#include <Kokkos_Core.hpp>

#include <algorithm>

#include "gemm.hpp"
#include "kernel_choice.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
double best_gemm_gflops(const KernelChoice& choice, int m, int n, int k, int repeats) {
  Mat<T> a("gemm_rate_a", m, k), b("gemm_rate_b", k, n), c("gemm_rate_c", m, n);
  Kokkos::deep_copy(a, T(0.01f));  // normal values (no denormal slow paths)
  Kokkos::deep_copy(b, T(0.02f));
  double best = 0;
  for (int r = 0; r <= repeats; ++r) {
    ExecSpace().fence();
    Kokkos::Timer timer;
    gemm_optimized(choice, Op::N, Op::N, T(1), a, b, T(0), c);
    ExecSpace().fence();
    const double s = timer.seconds();
    if (r > 0 && s > 0) best = std::max(best, 2.0 * double(m) * n * k / s / 1e9);
  }
  return best;
}

template <class T>
double measured_gemm_gflops(const KernelChoice& choice, int n = 1024, int repeats = 3) {
  return best_gemm_gflops<T>(choice, n, n, n, repeats);
}

template <class T>
double probe_gemm_gflops(const KernelChoice& choice) {
  return best_gemm_gflops<T>(choice, 512, 2048, 1024, 3);
}

}  // namespace minilst::kernels
