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

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

Handle create_file(const std::string& path);  // truncates
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

}  // namespace minilst::h5
