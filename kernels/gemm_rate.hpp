// The dense GEMM rate the run's precision gets on this process's execution space:
// C = A B on n x n matrices through kernels::gemm (the BLAS, cuBLAS, or the bf16 path
// the run chose), the best of `repeats` timed calls after one warm-up call. MFU is
// measured against it (a machine's own peak for the run's arithmetic, measured in the
// same run). 2 n^3 FLOPs per call.
#pragma once

#include <Kokkos_Core.hpp>

#include <algorithm>

#include "gemm.hpp"
#include "types.hpp"

namespace minilst::kernels {

template <class T>
double measured_gemm_gflops(int n = 1024, int repeats = 3) {
  Mat<T> a("gemm_rate_a", n, n), b("gemm_rate_b", n, n), c("gemm_rate_c", n, n);
  Kokkos::deep_copy(a, T(0.01f));  // normal values (no denormal slow paths)
  Kokkos::deep_copy(b, T(0.02f));
  double best = 0;
  for (int r = 0; r <= repeats; ++r) {
    ExecSpace().fence();
    Kokkos::Timer timer;
    gemm(Op::N, Op::N, T(1), a, b, T(0), c);
    ExecSpace().fence();
    const double s = timer.seconds();
    if (r > 0 && s > 0) best = std::max(best, 2.0 * double(n) * n * n / s / 1e9);
  }
  return best;
}

}  // namespace minilst::kernels
