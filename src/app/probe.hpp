// `minilst probe --out FILE.yaml`: measures the machine it runs on, every rank of the job,
// and writes a machine file (app/machine_file.hpp, docs/time_model.md) for `minilst plan
// --machine`: GEMM rates per precision and shape class through the run's GEMM paths (the
// `auto` choice a deck gets), the attention kernel forward and backward, a streaming
// kernel's bandwidth (rmsnorm), the per-call overhead, the host <-> device copy, and, on
// several ranks, point-to-point, all-to-all, all-reduce, all-gather and reduce-scatter
// latency, bandwidth and wait after compute through the communicator the strategies use
// (within a node, and across nodes when the job spans several); then a small training step
// per precision through the run's own code, whose phases over their priced times are the
// file's step_scale. Implausible figures (a GEMM below 1% of nominal, a link below the
// floor, a step_scale outside [0.2, 10]) are refused (exit 3) unless --allow-implausible.
// Collective: every rank calls it; rank 0 writes the file.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "predict/machine_file.hpp"

namespace minilst {

struct ProbeArgs {
  std::string out;             // --out FILE.yaml
  std::string name;            // --name (default: the host name)
  int size = 256;              // --size n: GEMM classes n^3, 8n x n x n, 8n x 2.69n x n, 4n x 16n x n; attention S = 4n
  int repeats = 3;             // --repeats: timed windows per figure (the median is kept)
  int head_dim = 64;           // --head-dim of the attention probe
  double comm_mib = 4;         // --comm-mib: the collectives' bandwidth message per rank
  double link_floor_gbs = 0;   // --link-floor-gbs (0: kDefaultLinkFloorGBs)
  bool allow_implausible = false;
  std::string command_line;    // for the provenance
};

// Exit code: 0 written; 2 bad request; 3 implausible figures (nothing written).
int run_probe(const ProbeArgs& args, MPI_Comm comm);

// What is wrong with the arguments (naming the options), or "".
std::string probe_args_problem(const ProbeArgs& args);

// The machine measured as run_probe measures it, nothing written; collective, and every rank
// returns the same file. `slow`: the links below the floor; with stop_on_slow_link the compute
// is then not measured. Implausible figures are left for implausible_figures to name.
MachineFile measure_machine(const ProbeArgs& args, MPI_Comm comm, bool stop_on_slow_link, std::vector<std::string>& slow);

}  // namespace minilst
