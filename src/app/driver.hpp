// Runs a resolved deck: builds the trainer, runs the steps with a progress line
// each, writes the tensor dump and the metrics file, prints the summary and the
// final RESULT line. Ranks beyond one are data parallel (each its own token
// stream, gradients averaged) until sequence parallelism arrives.
#pragma once

#include <mpi.h>

#include "io/deck.hpp"

namespace minilst {

struct RunContext {
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0, nranks = 1;
  int argc = 0;
  char** argv = nullptr;
};

// Returns the process exit code: 0 VALID, 3 INVALID.
int run_deck(const Deck& deck, const RunContext& ctx);

}  // namespace minilst
