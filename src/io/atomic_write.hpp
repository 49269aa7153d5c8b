// Files a run leaves are whole or absent: written under a temporary name with every
// error checked, synced, then renamed over the final name (the directory synced too).
#pragma once

#include <cstddef>
#include <string>

namespace minilst {

// Whether `path` may be the target of that rename: "" when it is absent or a regular
// file; else why not (a symbolic link, which a rename would replace and a write would
// follow; a directory, device, pipe or socket).
std::string rename_target_problem(const std::string& path);

// `size` bytes written to path + partial_suffix (never through a link), synced, renamed
// to path. Throws std::runtime_error with the reason; the temporary name is removed then.
void write_file_atomically(const std::string& path, const char* data, std::size_t size,
                           const std::string& partial_suffix = ".partial");

}  // namespace minilst
