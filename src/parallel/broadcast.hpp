// Rank 0's text on every rank of comm (collective).
#pragma once

#include <mpi.h>

#include <string>

namespace minilst {

inline std::string broadcast_string(std::string text, MPI_Comm comm) {
  unsigned long long size = text.size();
  MPI_Bcast(&size, 1, MPI_UNSIGNED_LONG_LONG, 0, comm);
  text.resize(std::size_t(size));
  MPI_Bcast(text.data(), int(size), MPI_CHAR, 0, comm);
  return text;
}

}  // namespace minilst
