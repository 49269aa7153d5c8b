// Helpers shared by the model-level tests.
#pragma once

#include <mpi.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/types.hpp"
#include "model/trainer.hpp"

namespace minilst::test {

// The ranks of MPI_COMM_WORLD (the parallel tests run under mpiexec -n 1, 2, 3, 4).
inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// A host copy of a device vector, in double.
template <class T>
std::vector<double> host(const Vec<T>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return {h.data(), h.data() + h.extent(0)};
}

// The small model of the model-level tests: odd sizes, GQA 4/2.
inline ModelConfig tiny_config(int layers = 2) {
  ModelConfig c;
  c.hidden = 24;
  c.layers = layers;
  c.heads = 4;
  c.kv_heads = 2;
  c.intermediate = 36;
  c.vocab = 29;
  return c;
}

inline TrainOptions train_options() {
  TrainOptions t;
  t.seed = 7;
  t.norm_init_noise = 0.1;
  t.init_std = 0.2;  // large enough that every part of the model matters
  return t;
}

// Positions 0, 1, ..., n-1: all tokens of a sequence on one rank.
inline std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  return p;
}

// Norm-wise relative error ||a - b|| / ||b||.
inline double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace minilst::test
