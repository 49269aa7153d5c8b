// The --kokkos-* flags `minilst run` passes to Kokkos (3.4 to 4.x), checked before
// Kokkos sees them: Kokkos would ignore a misspelt flag, abort on a malformed value,
// or start without a tools library it cannot load (a path that is no shared library, a
// library with no Kokkos Tools entry point), saying nothing: all refused here (exit 2).
#pragma once

#include <string>

namespace minilst {

// "" when `arg` (starting with --kokkos-) is a flag Kokkos knows with a valid value, else the reason.
std::string kokkos_flag_problem(const std::string& arg);

// "" when the environment the libraries read at start-up holds nothing they would crash on,
// ignore or run away with, else the reason naming the variable: KOKKOS_TOOLS_LIBS and
// KOKKOS_PROFILE_LIBRARY (as --kokkos-tools-libs), the thread counts OMP_NUM_THREADS (a list),
// OPENBLAS_NUM_THREADS and KOKKOS_NUM_THREADS (whole numbers >= 1, at most 4 x this node's hardware
// threads or 256), SLURM_JOB_END_TIME (Unix seconds) and SLURM_STEP_NUM_TASKS (a count).
std::string environment_problem();

}  // namespace minilst
