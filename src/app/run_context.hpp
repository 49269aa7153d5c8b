// What a run knows of its process: the communicator, its rank among how many, the
// command line (for the record) and the process's watchdog.
#pragma once

#include <mpi.h>

namespace minilst {

class Watchdog;

struct RunContext {
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0, nranks = 1;
  int argc = 0;
  char** argv = nullptr;
  Watchdog* watchdog = nullptr;  // the process's (job/watchdog.hpp), armed from MPI_Init to MPI_Finalize
};

}  // namespace minilst
