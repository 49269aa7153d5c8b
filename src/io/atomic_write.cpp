#include "io/atomic_write.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace minilst {

namespace fs = std::filesystem;

std::string rename_target_problem(const std::string& path) {
  std::error_code ec;
  const auto st = fs::symlink_status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) return "cannot access '" + path + "': " + ec.message();
  if (fs::is_symlink(st)) return "'" + path + "' is a symbolic link: give the file's own path";
  if (fs::exists(st) && !fs::is_regular_file(st))
    return "'" + path + "' exists and is not a regular file (" +
           (fs::is_directory(st) ? std::string("a directory") : std::string("a device, pipe or socket")) + ")";
  return "";
}

namespace {
void fsync_directory(const std::string& path) {  // best effort: the rename is made durable
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}
}  // namespace

void write_file_atomically(const std::string& path, const char* data, std::size_t size,
                           const std::string& partial_suffix) {
  const std::string partial = path + partial_suffix;
  const auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    ::unlink(partial.c_str());
    throw std::runtime_error("cannot " + what + " '" + partial + "': " + reason);
  };
  if (const auto problem = rename_target_problem(partial); !problem.empty()) throw std::runtime_error(problem);
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
  if (fd < 0) fail("create");
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      fail("write");
    }
    done += std::size_t(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("write to disk");
  }
  if (::close(fd) != 0) fail("close");
  if (const auto problem = rename_target_problem(path); !problem.empty()) {
    ::unlink(partial.c_str());
    throw std::runtime_error(problem);
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) fail("rename to '" + path + "'");
  fsync_directory(fs::absolute(path).parent_path().string());
}

}  // namespace minilst
