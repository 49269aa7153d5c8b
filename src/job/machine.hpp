// What the machine offers this rank, probed once before the first step: the
// memory it may use and the host budget for offloaded activations. Collective
// (every rank gets the smallest over ranks, so every rank decides alike).
#pragma once

#include <mpi.h>

#include <string>

#include "io/deck.hpp"

namespace minilst {

// Host memory is what the node has available (MemAvailable, within a cgroup v2
// limit) shared by its ranks; on CUDA builds the device's is the free memory of
// the rank's GPU.
struct AvailableMemory {
  double host = 0, device = 0;  // bytes; 0 = unknown
};
AvailableMemory available_memory(MPI_Comm comm);

// memory.host_budget_mib in bytes, or (auto) 3/4 of the node's physical memory
// shared by the ranks on the node.
double host_budget_bytes(const MemoryConfig& memory, MPI_Comm comm);

// The dense peak of this rank's device for the run's precision, from its datasheet,
// in GFLOP/s (bf16: tensor cores, dense; float: the fp32 units, as cuBLAS's SGEMM runs
// without TF32; double: FP64 tensor cores), and its name; 0 where the device is not in
// the table (every host build: there the measured GEMM rate is the only peak).
struct NominalPeak {
  double gflops = 0;
  std::string device;
};
NominalPeak nominal_peak(Precision precision);

}  // namespace minilst
