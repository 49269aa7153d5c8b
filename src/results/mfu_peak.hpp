// The peak a run's MFU is divided by, fixed for the machine, so that repeats of a deck report MFUs
// that differ only as their steps do; the run's own GEMM rate (measured at each start,
// results/gemm_peak.hpp) is reported beside it. The first that applies:
//   datasheet  the device's dense peak for the run's precision (a GPU in predict/device_facts.hpp)
//   machine    `run --machine FILE`: that file's MFU peak, the one `plan --machine` divides by (a
//              nominal file's nominal.gemm_gflops, a probed file's square GEMM)
//   host       this CPU's peak, measured once: the GEMM peak of the first run on a quiet node for
//              this CPU model and ISA, precision, GEMM path, threads per rank and ranks per node,
//              stored in <cache>/host_peaks.json (cache: $MINILST_CACHE, else
//              $XDG_CACHE_HOME/minilst, else ~/.cache/minilst) and read, not re-timed, by every
//              later run; a run that measures 10% more replaces it (it was measured low)
//   run        the run's own rate, where no store can be read or written, or the node was busy
//              while the run measured it (job/node_load.hpp): nothing is stored then
#pragma once

#include <mpi.h>

#include <string>

namespace minilst {

struct MfuPeak {
  double gflops = 0;   // per rank
  std::string kind;    // datasheet | machine | host | run
  std::string source;  // in words (the set-up line, the metrics' mfu_peak_source)
};

// What a host peak is stored under: this CPU's model and ISA, the precision, the GEMM path, the
// threads of a rank and the ranks of a node.
std::string host_peak_key(const std::string& precision, const std::string& gemm_path, int threads_per_rank,
                          int ranks_per_node);

// The store's file (<cache>/host_peaks.json).
std::string host_peak_store();

// Rank 0 reads (and where due writes) the store; every rank gets its answer. `measured`: this
// run's GEMM rate per rank; `node_quiet`: the node was not busy while it was measured.
MfuPeak host_mfu_peak(double measured, const std::string& key, bool node_quiet, MPI_Comm comm);

}  // namespace minilst
