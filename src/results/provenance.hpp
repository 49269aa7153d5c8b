// Where and how a run happened, as string attributes for the metrics file:
// LLNL Adiak's standard keys with Adiak's meaning (user: the login name; launchdate:
// the process's start in seconds since the epoch, launchdate_utc the same as text;
// executable and executablepath: the program file; clustername: the host name without
// digits; jobsize: MPI ranks; numhosts, hostlist: the distinct hosts; mpi_version: the
// MPI standard; mpi_library: MPI_Get_library_version's text, mpi_library_vendor and
// mpi_library_version parsed from it), where each rank ran (placement: host, the CPUs
// of its affinity mask and their physical cores, gathered over ranks; cpu_binding;
// cores_shared: whether two ranks may run on one core, with cores_shared_note naming
// them), the build (git_commit, git_dirty, compiler, cmake_build_type, kokkos_version,
// kokkos_devices, blas), the machine (cpu_model, cpu_isa, memory_bytes, gpu) and the
// Slurm job variables when present.
// Collective over comm (host names and placements are gathered).
#pragma once

#include <mpi.h>

#include <map>
#include <string>
#include <utility>

namespace minilst {

std::map<std::string, std::string> collect_provenance(MPI_Comm comm, int argc, char** argv);

// Threads one rank computes with: Kokkos' (its default execution space's
// concurrency) and the BLAS's (OpenBLAS reports its own; 1 when unknown).
struct ThreadCounts {
  int kokkos = 1, blas = 1;
  int cores_allowed = 0;     // the cores this process may run on (its affinity mask); 0 = unknown
  std::string kokkos_space;  // "Serial", "OpenMP", "Cuda", ...
};
ThreadCounts thread_counts();

// This CPU's model name and vector ISA ("avx512+avx512_bf16+amx_bf16"), from /proc/cpuinfo.
std::pair<std::string, std::string> cpu_model_and_isa();

// "minilst <version> (git <commit>[-dirty])"
std::string version_string();

// UTC time as 20261122T104400Z (file names) or 2026-11-22T10:44:00Z (metadata).
std::string utc_time(bool compact);

}  // namespace minilst
