// Every rank of a job must run the same command: the same command line and the
// same resolved deck, and then the same kernels. A job whose ranks differ (one node given another deck, an
// MPMD launch with different flags, one rank given `--help` or `plan`) would
// otherwise hang in its first collective or mislead. Both checks are collective,
// made before anything else is, and give the same verdict on every rank: 0, or 2
// with rank 0 naming the first difference.
#pragma once

#include <limits>

#include <mpi.h>

#include <string>

#include "core/kernel_choice.hpp"

namespace minilst {

// argv[1..] on every rank; the first collective of the program.
int agree_on_command_line(int argc, char** argv, MPI_Comm comm);
// The resolved deck (or, where `error` is not empty, the reason this rank could not read it).
int agree_on_deck(const std::string& resolved_yaml, const std::string& error, MPI_Comm comm);
// The run's kernel choice, the same on every rank (core/kernel_choice.hpp): the GEMM
// paths every rank can run, then rank 0's resolution (and measurement) of `request`;
// run_flops: the run's work per rank (a run smaller than the measurement is not measured).
// Requires kernel_choice_refusal(request, ...) == "" on every rank.
ResolvedKernels agree_on_kernels(const KernelChoice& request, Precision precision, int head_dim, MPI_Comm comm,
                                 double run_flops = std::numeric_limits<double>::infinity());

}  // namespace minilst
