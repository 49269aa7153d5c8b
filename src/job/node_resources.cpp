#include "job/node_resources.hpp"

#include <Kokkos_Macros.hpp>  // KOKKOS_ENABLE_CUDA
#include <unistd.h>
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/units.hpp"
#include "parallel/node.hpp"
#include "predict/device_facts.hpp"

namespace minilst {

namespace {

double meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024.0;
  return 0;
}

double cgroup_available() {  // cgroup v2: memory.max - memory.current; 0 when unlimited or unknown
  std::ifstream max_in("/sys/fs/cgroup/memory.max"), cur_in("/sys/fs/cgroup/memory.current");
  std::string max_text;
  double current = 0;
  if (!(max_in >> max_text) || max_text == "max" || !(cur_in >> current)) return 0;
  return std::max(0.0, std::strtod(max_text.c_str(), nullptr) - current);
}
}  // namespace

AvailableMemory available_memory(MPI_Comm comm) {
  const int local_ranks = node_ranks(comm).size;
  AvailableMemory a;
  double host = meminfo_available();
  if (const double cg = cgroup_available(); cg > 0 && (host == 0 || cg < host)) host = cg;
  a.host = host / local_ranks;
#ifdef KOKKOS_ENABLE_CUDA
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) a.device = double(free_b);
#endif
  double v[2] = {a.host > 0 ? a.host : HUGE_VAL, a.device > 0 ? a.device : HUGE_VAL};
  MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MIN, comm);
  a.host = v[0] == HUGE_VAL ? 0 : v[0];
  a.device = v[1] == HUGE_VAL ? 0 : v[1];
  return a;
}

NominalPeak nominal_peak(Precision precision) {
  NominalPeak p;
#ifdef KOKKOS_ENABLE_CUDA
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return p;
  p.device = prop.name;
  if (const DeviceFacts* d = device_of_runtime_name(p.device)) p.gflops = d->peak(peak_format(precision));
#else
  (void)precision;
#endif
  return p;
}

double host_budget_bytes(const MemoryConfig& memory, MPI_Comm comm) {
  double budget = memory.host_budget_mib * kMiB;
  if (memory.host_budget_auto)
    budget = 0.75 * double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)) / node_ranks(comm).size;
  MPI_Allreduce(MPI_IN_PLACE, &budget, 1, MPI_DOUBLE, MPI_MIN, comm);
  return budget;
}

}  // namespace minilst
