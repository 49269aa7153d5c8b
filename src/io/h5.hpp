// A thin RAII layer over the HDF5 C API (1.10 - 1.14 stable calls only):
// files, groups, scalar/string attributes, and 1-D/2-D datasets with a `units`
// attribute. Errors throw std::runtime_error naming the object.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/atomic_write.hpp"

namespace minilst::h5 {

class Handle {  // closes an hid_t with the matching H5*close
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t), const std::string& what);
  ~Handle();
  Handle(Handle&& o) noexcept;
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t id() const { return id_; }
  void close();  // now, checked (throws when HDF5 fails, e.g. a full disk); the destructor ignores errors

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

Handle create_file(const std::string& path);  // truncates

// A result file: built in memory, written under <path><partial_suffix> (by default a
// name of this write's own, io/atomic_write.hpp) and renamed to <path>
// only once every byte is on disk (fsync), so <path> is whole or absent (or the
// previous whole version). Without commit() nothing is left behind.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path, const std::string& partial_suffix = unique_partial_suffix());
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  hid_t id() const { return file_.id(); }
  void commit();

 private:
  std::string path_, partial_;
  Handle file_;
  bool committed_ = false;
};

// Before a run writes `path` (a result file whose root attribute `schema` is
// `schema`): "" when it may, else the reason. Refused: a name ending in '/' or
// naming a directory; a symbolic link, device, pipe or socket (at path or at
// path.partial, an earlier version's temporary name); an existing file that is not a
// result of the same schema (a user's notes, a deck, another kind of output) unless
// `overwrite`. The directory is created if missing, and creating a file beside `path`
// (under a temporary name of this run's own) is tried.
std::string prepare_output(const std::string& path, const std::string& schema, bool overwrite);
Handle open_file_readonly(const std::string& path);
// The group at `path` ("/a/b"), created with its parents if missing.
Handle group(hid_t file, const std::string& path);

void attr(hid_t obj, const std::string& name, const std::string& value);
void attr(hid_t obj, const std::string& name, double value);
void attr(hid_t obj, const std::string& name, std::int64_t value);

// Datasets: `path` relative to `loc` may contain groups ("timings/step"), which
// are created. shape {} is a scalar, {n} 1-D, {n, m} 2-D (row-major data).
void write(hid_t loc, const std::string& path, const std::vector<double>& data,
           const std::vector<hsize_t>& shape, const std::string& units);
void write(hid_t loc, const std::string& path, const std::vector<float>& data,
           const std::vector<hsize_t>& shape, const std::string& units);
void write(hid_t loc, const std::string& path, const std::vector<std::int64_t>& data,
           const std::vector<hsize_t>& shape, const std::string& units);

// Reading back (tests and tools). Each checks what the file declares before reading
// (the type class, one value for an attribute, a simple dataspace of at most max_values
// values for a dataset) and throws a one-line runtime_error naming the object otherwise.
std::vector<double> read_doubles(hid_t loc, const std::string& path, std::size_t max_values = std::size_t(1) << 28);
std::string read_string_attr(hid_t obj, const std::string& name);  // variable or fixed length
double read_number_attr(hid_t obj, const std::string& name);       // an integer or real attribute
bool has_attr(hid_t obj, const std::string& name);                 // throws where HDF5 cannot tell

// Reading files that may be corrupt.
// HDF5's own error printing off, for the whole process: a file it cannot read is the
// caller's one-line message, not HDF5's stack of 10-15 lines.
void silence_errors();
// The innermost entry of HDF5's error stack (what went wrong first, e.g. "truncated
// file: eof = ..."), printable; "" when the stack is empty.
std::string innermost_error();
// `text` with control characters (a corrupt file's bytes, a newline) as '?': one line.
std::string printable(std::string text);
// Runs `read` in a forked child process and returns its string. Some corrupt files crash
// the HDF5 library itself (HDF5 1.10's variable-length reads copy past a heap object whose
// size is corrupt) where no check of the structure can tell beforehand: the child's crash,
// a read longer than `seconds` or one that needs more than `memory_bytes` more memory
// throws a runtime_error "'<file>' is unreadable: <why>"; an exception thrown by `read` is
// thrown again with its message. `read` runs with SIGALRM at its default action.
std::string read_isolated(const std::string& file, const std::function<std::string()>& read, unsigned seconds,
                          std::size_t memory_bytes);

}  // namespace minilst::h5
