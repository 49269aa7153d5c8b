#include "io/h5.hpp"

#include "io/atomic_write.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <stdexcept>
#include <vector>
#include <utility>

namespace minilst::h5 {

std::string printable(std::string text) {
  for (auto& ch : text)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return text;
}

namespace {

herr_t keep_last_description(unsigned, const H5E_error2_t* entry, void* out) {
  if (entry->desc && *entry->desc) *static_cast<std::string*>(out) = entry->desc;
  return 0;
}

// " (<HDF5's innermost error>)", or "" when HDF5 recorded none.
std::string hdf5_reason() {
  const auto why = innermost_error();
  return why.empty() ? "" : " (" + why + ")";
}

std::runtime_error failure(const std::string& what) {
  return std::runtime_error("HDF5: cannot " + what + hdf5_reason());
}
}  // namespace

std::string innermost_error() {
  std::string last;  // walking from the API call inwards: the last entry is where it went wrong first
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_last_description, &last);
  return printable(last);
}

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

Handle::Handle(hid_t id, herr_t (*close)(hid_t), const std::string& what) : id_(id), close_(close) {
  if (id < 0) throw failure(what);
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
  if (auto problem = target_problem(path); !problem.empty()) return problem;
  if (auto problem = existing_problem(path, schema, overwrite); !problem.empty()) return problem;
  if (auto problem = target_problem(path + ".partial"); !problem.empty()) return problem;  // an older miniLST's name
  std::error_code ec;
  const auto dir = fs::absolute(path, ec).parent_path();
  if (!dir.empty() && !fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return "cannot create the directory '" + dir.string() + "': " + ec.message();
  }
  // A file can be created beside `path`: tried under a name no other run uses.
  const std::string probe = path + unique_partial_suffix();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_EXCL, 0644);
  if (fd < 0) return "cannot create a file beside '" + path + "' ('" + probe + "'): " + std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
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

namespace {
constexpr std::size_t kMaxStringBytes = std::size_t(1) << 24;  // a longer attribute is a corrupt size

// The attribute `name` of obj, which must exist.
Handle open_attr(hid_t obj, const std::string& name) {
  if (!has_attr(obj, name)) throw std::runtime_error("no attribute '" + name + "'");
  return Handle(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute '" + name + "'");
}

// How many values a dataspace holds; throws unless it is scalar or simple (a null or
// corrupt dataspace) or holds more than max_values.
std::size_t value_count(hid_t space, const std::string& what, std::size_t max_values) {
  const H5S_class_t kind = H5Sget_simple_extent_type(space);
  if (kind == H5S_SCALAR) return 1;
  if (kind != H5S_SIMPLE) throw std::runtime_error(what + " has no values (its dataspace is not simple)");
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n < 0) throw failure("count the values of " + what);
  if (std::size_t(n) > max_values)
    throw std::runtime_error(what + " claims " + std::to_string(n) + " values (more than " +
                             std::to_string(max_values) + ")");
  return std::size_t(n);
}

void expect_one_value(hid_t attr, const std::string& what) {
  const Handle space(H5Aget_space(attr), H5Sclose, "get the dataspace of " + what);
  if (value_count(space.id(), what, 1) != 1) throw std::runtime_error(what + " holds no value");
}

// Integers and IEEE reals of the standard sizes, either byte order: what HDF5 converts to
// double with its hard conversions (a corrupt float layout would take its soft path).
bool standard_number(hid_t type) {
  // A named array, not a braced list in the loop: the H5T_* names are comma expressions that
  // nvcc's front end does not take there (CUDA builds compile this file too).
  const hid_t known[] = {H5T_IEEE_F32LE, H5T_IEEE_F32BE, H5T_IEEE_F64LE, H5T_IEEE_F64BE, H5T_STD_I8LE, H5T_STD_I8BE,
                         H5T_STD_I16LE, H5T_STD_I16BE, H5T_STD_I32LE, H5T_STD_I32BE, H5T_STD_I64LE, H5T_STD_I64BE,
                         H5T_STD_U8LE, H5T_STD_U8BE, H5T_STD_U16LE, H5T_STD_U16BE, H5T_STD_U32LE, H5T_STD_U32BE,
                         H5T_STD_U64LE, H5T_STD_U64BE};
  for (const hid_t k : known)
    if (H5Tequal(type, k) > 0) return true;
  return false;
}

void expect_number_type(hid_t type, const std::string& what) {
  const H5T_class_t kind = H5Tget_class(type);
  if (kind != H5T_INTEGER && kind != H5T_FLOAT) throw std::runtime_error(what + " is not a number");
  if (!standard_number(type)) throw std::runtime_error(what + " has a number type of no standard layout");
}

std::string read_variable_string(hid_t attr, H5T_cset_t cset, const std::string& name) {
  const Handle memory(H5Tcopy(H5T_C_S1), H5Tclose, "copy string type");
  if (H5Tset_size(memory.id(), H5T_VARIABLE) < 0 || H5Tset_cset(memory.id(), cset) < 0)
    throw failure("make a string type");
  char* data = nullptr;
  if (H5Aread(attr, memory.id(), &data) < 0) throw failure("read string attribute '" + name + "'");
  if (!data) throw std::runtime_error("string attribute '" + name + "' has no value");
  std::string out(data, strnlen(data, kMaxStringBytes));
  H5free_memory(data);
  return out;
}

std::string read_fixed_string(hid_t attr, hid_t type, const std::string& name) {
  const std::size_t size = H5Tget_size(type);
  if (size == 0 || size > kMaxStringBytes)
    throw std::runtime_error("string attribute '" + name + "' has a size of " + std::to_string(size) + " bytes");
  const Handle memory(H5Tcopy(type), H5Tclose, "copy the type of attribute '" + name + "'");
  std::vector<char> data(size + 1, '\0');
  if (H5Aread(attr, memory.id(), data.data()) < 0) throw failure("read string attribute '" + name + "'");
  return std::string(data.data(), strnlen(data.data(), size));
}
}  // namespace

std::vector<double> read_doubles(hid_t loc, const std::string& path, std::size_t max_values) {
  const std::string what = "dataset '" + path + "'";
  const htri_t exists = H5Lexists(loc, path.c_str(), H5P_DEFAULT);
  if (exists < 0) throw failure("look for " + what);
  if (exists == 0) throw std::runtime_error("no " + what);
  Handle ds(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), H5Dclose, "open " + what);
  const Handle type(H5Dget_type(ds.id()), H5Tclose, "get the type of " + what);
  expect_number_type(type.id(), what);
  const Handle space(H5Dget_space(ds.id()), H5Sclose, "get the dataspace of " + what);
  std::vector<double> out(value_count(space.id(), what, max_values));
  if (!out.empty() && H5Dread(ds.id(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    throw failure("read " + what);
  return out;
}

bool has_attr(hid_t obj, const std::string& name) {
  const htri_t exists = H5Aexists(obj, name.c_str());
  if (exists < 0) throw failure("look for attribute '" + name + "'");
  return exists > 0;
}

double read_number_attr(hid_t obj, const std::string& name) {
  const std::string what = "attribute '" + name + "'";
  const Handle a = open_attr(obj, name);
  const Handle type(H5Aget_type(a.id()), H5Tclose, "get the type of " + what);
  expect_number_type(type.id(), what);
  expect_one_value(a.id(), what);
  double value = 0;
  if (H5Aread(a.id(), H5T_NATIVE_DOUBLE, &value) < 0) throw failure("read " + what);
  return value;
}

std::string read_string_attr(hid_t obj, const std::string& name) {
  const std::string what = "attribute '" + name + "'";
  const Handle a = open_attr(obj, name);
  const Handle type(H5Aget_type(a.id()), H5Tclose, "get the type of " + what);
  if (H5Tget_class(type.id()) != H5T_STRING) throw std::runtime_error(what + " is not a string");
  expect_one_value(a.id(), what);
  const H5T_cset_t cset = H5Tget_cset(type.id());
  if (cset != H5T_CSET_ASCII && cset != H5T_CSET_UTF8) throw std::runtime_error(what + " has an unknown character set");
  const htri_t variable = H5Tis_variable_str(type.id());
  if (variable < 0) throw failure("get the kind of " + what);
  return variable ? read_variable_string(a.id(), cset, name) : read_fixed_string(a.id(), type.id(), name);
}

namespace {
// The child's address space capped at what it holds now plus `extra` bytes: a corrupt
// size then fails an allocation instead of taking the machine's memory.
void cap_address_space(std::size_t extra) {
  std::size_t pages = 0;
  if (!(std::ifstream("/proc/self/statm") >> pages)) return;
  const rlim_t limit = rlim_t(pages) * rlim_t(::sysconf(_SC_PAGESIZE)) + rlim_t(extra);
  const rlimit cap{limit, limit};
  ::setrlimit(RLIMIT_AS, &cap);
}

bool write_all(int fd, const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += std::size_t(n);
  }
  return true;
}

std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return text;
    text.append(buffer, std::size_t(n));
  }
}

// In the forked child: runs `read` under the limits and sends back 'R' + its string or
// 'E' + the message of what it threw ('M': out of memory); never returns (no exit handlers,
// no stdio flush).
[[noreturn]] void run_child(int out, const std::function<std::string()>& read, unsigned seconds,
                            std::size_t memory_bytes) {
  // Silent: the default actions (MPI's handlers print a backtrace) and stderr to /dev/null
  // (the C library's "free(): invalid pointer" before it aborts); the reply says what happened.
  for (int sig : {SIGALRM, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
  ::setenv("LIBC_FATAL_STDERR_", "1", 1);  // those messages to stderr, not to the terminal
  if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) ::dup2(null, STDERR_FILENO);
  ::alarm(seconds);
  cap_address_space(memory_bytes);
  std::string reply;
  try {
    reply = "R" + read();
  } catch (const std::bad_alloc&) {
    reply = "Mout of memory";
  } catch (const std::exception& e) {
    reply = std::string("E") + e.what();
  } catch (...) {
    reply = "Ean unknown error";
  }
  ::_exit(write_all(out, reply) ? 0 : 1);
}

// Why a child that sent no answer ended.
std::string child_failure(int status, unsigned seconds) {
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
    return "reading it took longer than " + std::to_string(seconds) + " s (the HDF5 library looping on it?)";
  if (WIFSIGNALED(status))
    return "the HDF5 library crashed reading it (signal " + std::to_string(WTERMSIG(status)) + ", " +
           printable(strsignal(WTERMSIG(status))) + ")";
  return "the reading process failed (exit code " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")";
}
}  // namespace

std::string read_isolated(const std::string& file, const std::function<std::string()>& read, unsigned seconds,
                          std::size_t memory_bytes) {
  const std::string unreadable = "'" + printable(file) + "' is unreadable: ";
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(unreadable + "cannot make a pipe: " + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(unreadable + "cannot start a reading process: " + std::strerror(error));
  }
  if (pid == 0) {
    ::close(fds[0]);
    run_child(fds[1], read, seconds, memory_bytes);
  }
  ::close(fds[1]);
  const std::string reply = read_all(fds[0]);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const bool answered = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !reply.empty();
  if (!answered) throw std::runtime_error(unreadable + child_failure(status, seconds));
  if (reply[0] == 'M')
    throw std::runtime_error(unreadable + "reading it needs more than " + std::to_string(memory_bytes >> 20) +
                             " MiB more memory (a corrupt size?)");
  if (reply[0] == 'E') throw std::runtime_error(printable(reply.substr(1)));
  return reply.substr(1);
}

}  // namespace minilst::h5
