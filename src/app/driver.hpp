// Runs a resolved deck: builds the trainer, runs the steps with a progress line
// each, writes the tensor dump and the metrics file, prints the summary and the
// final RESULT line.
#pragma once

#include <mpi.h>

#include "io/deck.hpp"

namespace minilst {

class Watchdog;

struct RunContext {
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0, nranks = 1;
  int argc = 0;
  char** argv = nullptr;
  Watchdog* watchdog = nullptr;  // the process's (app/watchdog.hpp), armed from MPI_Init to MPI_Finalize
};

// Returns the process exit code: 0 VALID, 2 refused, 3 INVALID, 4 INCOMPLETE (stopped early).
// An error throws, after this rank wrote the finished steps (MetricsRecorder::rescue).
int run_deck(const Deck& deck, const RunContext& ctx);

}  // namespace minilst
