// A short command run from inside an MPI process: posix_spawn (no fork of the
// process's memory, which RDMA-registered buffers do not survive everywhere), its
// stdout read with a deadline, killed when late.
#pragma once

#include <string>
#include <vector>

namespace minilst {

// argv[0] is looked up on PATH. Its standard output, or "" when it cannot start,
// fails (non-zero exit) or takes longer than timeout_s.
std::string run_command(const std::vector<std::string>& argv, double timeout_s);

}  // namespace minilst
