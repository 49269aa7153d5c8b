// The node's load while a run measures: other processes' CPU time, the hypervisor's steal and the
// load average against the cores the run uses, from Linux's /proc between the first measured step
// and the end. A run beside other work measures that work too: beyond the thresholds below the run
// is not reportable (results/run_rules.hpp, RUN_RULES.md), naming the load.
#pragma once

#include <mpi.h>

#include <string>

namespace minilst {

// Other processes' mean CPU use, in cores, above which a run is not reportable.
constexpr double kMaxOtherCores = 0.25;
// The hypervisor's steal, a fraction of the node's CPU time, above which a run is not reportable.
constexpr double kMaxStealFraction = 0.05;

// One rank's reading of its node (clock ticks of /proc/stat's "cpu" line, its own process's
// user + system ticks of /proc/self/stat) and the wall clock.
struct CpuSample {
  bool known = false;  // /proc readable (Linux)
  double busy = 0, steal = 0, total = 0, self = 0, wall = 0;
};
CpuSample sample_cpu();

struct NodeLoad {
  bool known = false;
  double other_cores = 0;     // other processes' mean CPU use, cores (the busiest node)
  double steal_fraction = 0;  // steal over the node's CPU time (the busiest node)
  double load_average = 0;    // the 1-minute load average at the end (the busiest node)
  int cores = 0;              // that node's online cores
  int cores_used = 0;         // its ranks x threads per rank
  std::string text() const;   // "other processes 1.02 cores, steal 0.0%, load average 2.91 on 2 cores (the run uses 1)"
  std::string excess() const;  // "" or why the load makes the run unreportable (the thresholds named)
};

// Collective over comm: each node's load since every rank's `start`; the busiest node's. Not
// known (known false) where /proc cannot be read or less than `min_seconds` passed: the kernel
// counts CPU time in clock ticks (10 ms), too coarse for a shorter look.
NodeLoad node_load_since(const CpuSample& start, int threads_per_rank, MPI_Comm comm, double min_seconds = 1.0);

}  // namespace minilst
