// The --kokkos-* flags `minilst run` passes to Kokkos (3.4 to 4.x), checked before
// Kokkos sees them: Kokkos would ignore a misspelt flag, abort on a malformed value,
// or start without a tools library it cannot load (a path that is no shared library, a
// library with no Kokkos Tools entry point), saying nothing: all refused here (exit 2).
#pragma once

#include <string>

namespace minilst {

// "" when `arg` (starting with --kokkos-) is a flag Kokkos knows with a valid value, else the reason.
std::string kokkos_flag_problem(const std::string& arg);

}  // namespace minilst
