// The ranks that share this rank's node (MPI_COMM_TYPE_SHARED): how many, and this
// rank's index among them (the GPU it takes, its share of the node's memory).
#pragma once

#include <mpi.h>

namespace minilst {

struct NodeRanks {
  int rank = 0, size = 1;
};
NodeRanks node_ranks(MPI_Comm comm);  // collective over comm

}  // namespace minilst
