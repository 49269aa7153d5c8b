// What the node offers this rank, read once before the first step: the memory it may use
// (the run's fit check, predict/fit_check.hpp), the host budget for offloaded activations, and
// the dense peak of its device for the MFU (predict/device_facts.hpp). Collective where noted
// (every rank gets the smallest over ranks, so every rank decides alike).
#pragma once

#include <mpi.h>

#include <string>

#include "io/deck.hpp"
#include "predict/fit_check.hpp"

namespace minilst {

// Collective. Host memory is what the node has available (MemAvailable, within a cgroup v2
// limit) shared by its ranks; on CUDA builds the device's is the free memory of the rank's GPU.
AvailableMemory available_memory(MPI_Comm comm);

// memory.host_budget_mib in bytes, or (auto) 3/4 of the node's physical memory
// shared by the ranks on the node.
double host_budget_bytes(const MemoryConfig& memory, MPI_Comm comm);

// The dense peak of this rank's device for the run's precision, from its datasheet
// (predict/device_facts.hpp: bf16 on the tensor cores, float on the fp32 units as cuBLAS's
// SGEMM runs without TF32, double the best FP64), in GFLOP/s, and the device's name; 0 where
// the device is not in the table (every host build: there the measured GEMM rate is the only peak).
struct NominalPeak {
  double gflops = 0;
  std::string device;
};
NominalPeak nominal_peak(Precision precision);

}  // namespace minilst
