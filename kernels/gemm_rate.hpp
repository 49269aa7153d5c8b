// GEMM rates measured in the running process.
//   measured_gemm_gflops<T>  the dense GEMM rate the run's precision gets on this process's
//                            execution space: C = A B on n x n matrices through the run's
//                            chosen path (gemm_optimized), the best of `repeats` timed calls
//                            after one warm-up call. MFU is measured against it (a machine's
//                            own peak for the run's arithmetic, measured in the same run).
//                            2 n^3 FLOPs per call.
//   probe_gemm_gflops<T>     one path's rate on a 512 x 2048 x 1024 product in T (C in T) in
//                            the step's three orientations (NT, NN, TN), best of three each
//                            after a warm-up: the probe that chooses a path where the deck
//                            says auto (src/core/kernel_choice.cpp).
//   kProbeGemmFlops          what that probe computes for one path (4 calls x 3 orientations).
#pragma once

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <utility>

#include "gemm.hpp"
#include "kernel_choice.hpp"
#include "types.hpp"

namespace minilst::kernels {

// The best rate of `repeats` timed calls (after a warm-up) of C [m, n] = op_a(A) op_b(B).
template <class T>
double best_gemm_gflops(const KernelChoice& choice, int m, int n, int k, int repeats, Op op_a = Op::N,
                        Op op_b = Op::N) {
  Mat<T> a("gemm_rate_a", op_a == Op::N ? m : k, op_a == Op::N ? k : m);
  Mat<T> b("gemm_rate_b", op_b == Op::N ? k : n, op_b == Op::N ? n : k), c("gemm_rate_c", m, n);
  Kokkos::deep_copy(a, T(0.01f));  // normal values (no denormal slow paths)
  Kokkos::deep_copy(b, T(0.02f));
  double best = 0;
  for (int r = 0; r <= repeats; ++r) {
    ExecSpace().fence();
    Kokkos::Timer timer;
    gemm_optimized(choice, op_a, op_b, T(1), a, b, T(0), c);
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

// The probe's rate: the step's three orientations (X W^T forward, dY W backward, dY^T X
// weight gradient) of one 512 x 2048 x 1024 product, their FLOPs over their summed best
// times: a path that is fast in one orientation only is not chosen for it.
constexpr int kProbeM = 512, kProbeN = 2048, kProbeK = 1024;
constexpr double kProbeGemmFlops = 4 * 3 * 2.0 * kProbeM * kProbeN * kProbeK;

template <class T>
double probe_gemm_gflops(const KernelChoice& choice) {
  constexpr int m = kProbeM, n = kProbeN, k = kProbeK;
  double seconds = 0;
  for (const auto& [op_a, op_b] : {std::pair{Op::N, Op::T}, std::pair{Op::N, Op::N}, std::pair{Op::T, Op::N}})
    seconds += 2.0 * double(m) * n * k / (best_gemm_gflops<T>(choice, m, n, k, 3, op_a, op_b) * 1e9);
  return 3 * 2.0 * double(m) * n * k / seconds / 1e9;
}

}  // namespace minilst::kernels
