// MFU's denominator: the dense GEMM rate of the run's precision through the run's own
// GEMM path, measured in the run. One shape and one timing can set it too low (a shape
// the library blocks badly, a call a neighbour disturbed), and an MFU above 1 follows;
// so each rank takes the best over several shapes (the square product and the tall and
// wide products of a transformer's projections) of the best of several timed calls of
// each, after a warm-up call. The peak is the mean of the ranks' best (each rank runs the
// same path). Where MFU still comes out above 1, the run rules say the peak was measured
// too low (results/run_rules.hpp).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "core/kernel_choice.hpp"
#include "kernels/gemm_rate.hpp"
#include "kernels/gemm_shape.hpp"

namespace minilst {

struct GemmPeak {
  double gflops = 0;   // per rank: the mean over ranks of each rank's best
  kernels::GemmShape best{0, 0, 0};  // the shape that gave rank 0's best
  std::string source;  // how it was measured, for the metrics file (peak_source)
};

// The shapes measured, around `n` (n^3, and n/2 x 2n x n, 2n x n/2 x n).
inline std::vector<kernels::GemmShape> peak_shapes(int n) {
  const std::size_t a = std::size_t(n);
  return {{a, a, a}, {a / 2, 2 * a, a}, {2 * a, a / 2, a}};
}

// Collective: the peak of precision T through `choice`'s GEMM path, `repeats` timed calls per shape.
template <class T>
GemmPeak measure_gemm_peak(const KernelChoice& choice, const std::string& precision, MPI_Comm comm, int repeats = 3) {
#ifdef KOKKOS_ENABLE_CUDA
  constexpr int n = 4096;  // a device needs large products to reach its rate
#else
  constexpr int n = sizeof(T) == 8 ? 512 : 1024;  // double: the small exactness runs
#endif
  const auto shapes = peak_shapes(n);
  GemmPeak peak;
  for (const auto& s : shapes) {
    const double gflops = kernels::best_gemm_gflops<T>(choice, int(s.m), int(s.n), int(s.k), repeats);
    if (gflops > peak.gflops) {
      peak.gflops = gflops;
      peak.best = s;
    }
  }
  int nranks = 1;
  MPI_Comm_size(comm, &nranks);
  MPI_Allreduce(MPI_IN_PLACE, &peak.gflops, 1, MPI_DOUBLE, MPI_SUM, comm);
  peak.gflops /= nranks;
  std::string tried;
  for (const auto& s : shapes) tried += (tried.empty() ? "" : ", ") + s.text();
  peak.source = "measured: " + precision + " GEMM (kernels::gemm), the best of " + std::to_string(shapes.size()) +
                " shapes (" + tried + ") x " + std::to_string(repeats) + " timed calls after a warm-up, rank 0's best " +
                peak.best.text() + "; mean over ranks";
  return peak;
}

}  // namespace minilst
