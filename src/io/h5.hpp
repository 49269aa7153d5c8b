// A thin RAII layer over the HDF5 C API (1.10 - 1.14 stable calls only):
// files, groups, scalar/string attributes, and 1-D/2-D datasets with a `units`
// attribute. Errors throw std::runtime_error naming the object.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

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

// A result file: built in memory, written as <path>.partial and renamed to <path>
// only once every byte is on disk (fsync), so <path> is whole or absent (or the
// previous whole version). Without commit() nothing is left behind.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path, const std::string& partial_suffix = ".partial");
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
// path.partial); an existing file that is not a result of the same schema (a
// user's notes, a deck, another kind of output) unless `overwrite`. A regular
// file at path.partial is the leftover of an interrupted write, and is replaced. The directory
// is created if missing, and creating a file beside `path` is tried.
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

// Reading back (tests and tools).
std::vector<double> read_doubles(hid_t loc, const std::string& path);
std::string read_string_attr(hid_t obj, const std::string& name);
double read_number_attr(hid_t obj, const std::string& name);  // an integer or real attribute

}  // namespace minilst::h5
