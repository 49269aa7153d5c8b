// One rule for every file miniLST reads whole (a deck, a machine file, a validation table, a
// lock, a file whose digest a run records): opened without blocking, it must be a regular file
// (a symbolic link to one is followed) of at most `max_bytes`; a FIFO, a device, a socket or a
// directory is refused at once, never waited on or read without end.
#pragma once

#include <cstdint>
#include <string>

namespace minilst {

// The whole file; std::runtime_error "<what> '<path>': <why>" otherwise (not found, a directory,
// a FIFO, a device, larger than max_bytes, unreadable).
std::string read_input_file(const std::string& path, const std::string& what, std::uintmax_t max_bytes);

// The same without throwing: false and `why` ("a FIFO", "larger than 4096 bytes", ...).
bool try_read_input_file(const std::string& path, std::uintmax_t max_bytes, std::string& text, std::string& why);

// "" or why YAML text nests too deep for a reader to take (brackets or braces, outside quotes, more
// than kMaxYamlDepth deep; a line indented more than 4 x kMaxYamlDepth): every file miniLST reads
// nests a few levels.
constexpr int kMaxYamlDepth = 64;
std::string yaml_nesting_problem(const std::string& text);

}  // namespace minilst
