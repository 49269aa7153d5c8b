#include "io/h5.hpp"

#include "io/atomic_write.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>
#include <utility>

namespace minilst::h5 {

Handle::Handle(hid_t id, herr_t (*close)(hid_t), const std::string& what) : id_(id), close_(close) {
  if (id < 0) throw std::runtime_error("HDF5: cannot " + what);
}
Handle::~Handle() {
  if (id_ >= 0 && close_) close_(id_);
}
Handle::Handle(Handle&& o) noexcept { *this = std::move(o); }
Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    if (id_ >= 0 && close_) close_(id_);
    id_ = std::exchange(o.id_, -1);
    close_ = o.close_;
  }
  return *this;
}

void Handle::close() {
  if (id_ < 0 || !close_) return;
  const herr_t status = close_(std::exchange(id_, -1));
  if (status < 0) throw std::runtime_error("HDF5: close failed (disk full or I/O error?)");
}

namespace {
namespace fs = std::filesystem;

std::string target_problem(const std::string& path) { return rename_target_problem(path); }

// The `schema` attribute of an existing HDF5 file ("" if it is not HDF5 or has none),
// HDF5's error printing silenced (a user's text file is not an error here).
std::string schema_of(const std::string& path) {
  H5E_auto2_t func = nullptr;
  void* data = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &func, &data);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  std::string schema;
  if (H5Fis_hdf5(path.c_str()) > 0) {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f >= 0) {
      if (H5Aexists(f, "schema") > 0) {
        try {
          schema = read_string_attr(f, "schema");
        } catch (const std::exception&) {
        }
      }
      H5Fclose(f);
    }
  }
  H5Eset_auto2(H5E_DEFAULT, func, data);
  return schema;
}

// An existing regular file may be replaced only if it is a result of the same kind.
std::string existing_problem(const std::string& path, const std::string& schema, bool overwrite) {
  std::error_code ec;
  if (overwrite || !fs::exists(fs::symlink_status(path, ec))) return "";
  const auto found = schema_of(path);
  if (found == schema) return "";
  return "'" + path + "' exists and is not a miniLST output of this kind (" + schema + ")" +
         (found.empty() ? std::string("") : " (it is a '" + found + "' file)") +
         ": not overwritten (choose another name, remove it, or set output.overwrite: true)";
}

}  // namespace

std::string prepare_output(const std::string& path, const std::string& schema, bool overwrite) {
  if (path.empty()) return "no file name";
  if (path.back() == '/' || fs::path(path).filename() == "." || fs::path(path).filename() == "..")
    return "'" + path + "' names a directory: give a file name (e.g. " +
           (fs::path(path) / "metrics.h5").lexically_normal().string() + ")";
  const std::string partial = path + ".partial";  // a regular file there is an interrupted write's: replaced
  if (auto problem = target_problem(path); !problem.empty()) return problem;
  if (auto problem = existing_problem(path, schema, overwrite); !problem.empty()) return problem;
  if (auto problem = target_problem(partial); !problem.empty()) return problem;
  std::error_code ec;
  const auto dir = fs::absolute(path, ec).parent_path();
  if (!dir.empty() && !fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return "cannot create the directory '" + dir.string() + "': " + ec.message();
  }
  const bool had_partial = fs::exists(fs::symlink_status(partial, ec));
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | (had_partial ? 0 : O_EXCL), 0644);
  if (fd < 0) return "cannot create '" + partial + "': " + std::strerror(errno);
  ::close(fd);
  if (!had_partial) ::unlink(partial.c_str());
  return "";
}

// The file is built in memory (HDF5's core driver, no backing store), so HDF5
// itself never writes to the disk: the bytes go out through plain POSIX calls
// whose every error is checked (a full disk cannot leave HDF5 half-closed).
AtomicFile::AtomicFile(const std::string& path, const std::string& partial_suffix)
    : path_(path), partial_(path + partial_suffix) {
  if (const auto problem = target_problem(partial_); !problem.empty()) throw std::runtime_error(problem);
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "create a file access list");
  if (H5Pset_fapl_core(fapl.id(), 1 << 20, 0) < 0) throw std::runtime_error("HDF5: cannot select the core driver");
  file_ = Handle(H5Fcreate(partial_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id()), H5Fclose,
                 "create file '" + path + "' in memory");
}

AtomicFile::~AtomicFile() {
  if (!committed_) ::unlink(partial_.c_str());
}

void AtomicFile::commit() {
  if (H5Fflush(file_.id(), H5F_SCOPE_GLOBAL) < 0) throw std::runtime_error("HDF5: cannot flush '" + path_ + "'");
  const ssize_t size = H5Fget_file_image(file_.id(), nullptr, 0);
  if (size < 0) throw std::runtime_error("HDF5: cannot get the image of '" + path_ + "'");
  std::vector<char> image(std::size_t(size) + 1);
  if (H5Fget_file_image(file_.id(), image.data(), std::size_t(size)) != size)
    throw std::runtime_error("HDF5: cannot get the image of '" + path_ + "'");
  file_.close();
  write_file_atomically(path_, image.data(), std::size_t(size), partial_.substr(path_.size()));
  committed_ = true;
}

Handle create_file(const std::string& path) {
  return Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose,
                "create file '" + path + "'");
}

Handle open_file_readonly(const std::string& path) {
  return Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "open file '" + path + "'");
}

Handle group(hid_t file, const std::string& path) {
  std::string partial;
  std::size_t start = 1;
  while (start <= path.size()) {
    const auto slash = path.find('/', start);
    partial = path.substr(0, slash);
    if (partial.size() > 1 && H5Lexists(file, partial.c_str(), H5P_DEFAULT) <= 0) {
      Handle g(H5Gcreate2(file, partial.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
               "create group '" + partial + "'");
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return Handle(H5Gopen2(file, path.c_str(), H5P_DEFAULT), H5Gclose, "open group '" + path + "'");
}

namespace {
void attr_raw(hid_t obj, const std::string& name, hid_t type, const void* value) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "make scalar dataspace");
  Handle a(H5Acreate2(obj, name.c_str(), type, space.id(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
           "create attribute '" + name + "'");
  if (H5Awrite(a.id(), type, value) < 0) throw std::runtime_error("HDF5: cannot write attribute '" + name + "'");
}

// Splits "a/b/c" into the group "a/b" (created) and the leaf "c".
std::pair<Handle, std::string> parent_of(hid_t loc, const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0)
    return {Handle(H5Oopen(loc, ".", H5P_DEFAULT), H5Oclose, "open location"), path.substr(slash == 0 ? 1 : 0)};
  const std::string dir = path.substr(0, slash);
  return {group(loc, dir[0] == '/' ? dir : "/" + dir), path.substr(slash + 1)};
}

void write_raw(hid_t loc, const std::string& path, hid_t type, const void* data,
               const std::vector<hsize_t>& shape, const std::string& units) {
  auto [parent, leaf] = parent_of(loc, path);
  Handle space(shape.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(shape.size()), shape.data(), nullptr),
               H5Sclose, "make dataspace for '" + path + "'");
  Handle ds(H5Dcreate2(parent.id(), leaf.c_str(), type, space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose, "create dataset '" + path + "'");
  if (H5Dwrite(ds.id(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    throw std::runtime_error("HDF5: cannot write dataset '" + path + "'");
  attr(ds.id(), "units", units);
}
}  // namespace

// Strings are variable-length UTF-8: h5py and pandas read them as str.
Handle string_type() {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose, "copy string type");
  H5Tset_size(type.id(), H5T_VARIABLE);
  H5Tset_cset(type.id(), H5T_CSET_UTF8);
  return type;
}

void attr(hid_t obj, const std::string& name, const std::string& value) {
  const char* data = value.c_str();
  attr_raw(obj, name, string_type().id(), &data);
}
void attr(hid_t obj, const std::string& name, double value) { attr_raw(obj, name, H5T_NATIVE_DOUBLE, &value); }
void attr(hid_t obj, const std::string& name, std::int64_t value) { attr_raw(obj, name, H5T_NATIVE_INT64, &value); }

void write(hid_t loc, const std::string& path, const std::vector<double>& data, const std::vector<hsize_t>& shape,
           const std::string& units) {
  write_raw(loc, path, H5T_NATIVE_DOUBLE, data.data(), shape, units);
}
void write(hid_t loc, const std::string& path, const std::vector<float>& data, const std::vector<hsize_t>& shape,
           const std::string& units) {
  write_raw(loc, path, H5T_NATIVE_FLOAT, data.data(), shape, units);
}
void write(hid_t loc, const std::string& path, const std::vector<std::int64_t>& data,
           const std::vector<hsize_t>& shape, const std::string& units) {
  write_raw(loc, path, H5T_NATIVE_INT64, data.data(), shape, units);
}

std::vector<double> read_doubles(hid_t loc, const std::string& path) {
  Handle ds(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), H5Dclose, "open dataset '" + path + "'");
  Handle space(H5Dget_space(ds.id()), H5Sclose, "get dataspace of '" + path + "'");
  const hssize_t n = H5Sget_simple_extent_npoints(space.id());
  std::vector<double> out(std::size_t(n > 0 ? n : 0));
  if (H5Dread(ds.id(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    throw std::runtime_error("HDF5: cannot read dataset '" + path + "'");
  return out;
}

double read_number_attr(hid_t obj, const std::string& name) {
  Handle a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute '" + name + "'");
  double value = 0;
  if (H5Aread(a.id(), H5T_NATIVE_DOUBLE, &value) < 0) throw std::runtime_error("HDF5: cannot read attribute '" + name + "'");
  return value;
}

std::string read_string_attr(hid_t obj, const std::string& name) {
  Handle a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute '" + name + "'");
  char* data = nullptr;
  if (H5Aread(a.id(), string_type().id(), &data) < 0 || !data)
    throw std::runtime_error("HDF5: cannot read string attribute '" + name + "'");
  std::string out(data);
  H5free_memory(data);
  return out;
}

}  // namespace minilst::h5
