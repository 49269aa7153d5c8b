#include "io/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace minilst {

namespace {
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "something else";
}
}  // namespace

bool try_read_input_file(const std::string& path, std::uintmax_t max_bytes, std::string& text, std::string& why) {
  text.clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    why = errno == ENOENT ? "not found" : std::strerror(errno);
    return false;
  }
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  if (!stated || !S_ISREG(st.st_mode)) {
    why = !stated ? std::string(std::strerror(errno)) : kind_of(st.st_mode) + ", not a regular file";
    ::close(fd);
    return false;
  }
  if (std::uintmax_t(st.st_size) > max_bytes) {
    why = "larger than " + std::to_string(max_bytes) + " bytes (" + std::to_string(st.st_size) + ")";
    ::close(fd);
    return false;
  }
  char buffer[65536];
  for (;;) {  // the size may change while it is read: never past max_bytes
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    text.append(buffer, std::size_t(n));
    if (text.size() > max_bytes) {
      why = "larger than " + std::to_string(max_bytes) + " bytes (it grew while read)";
      ::close(fd);
      return false;
    }
  }
  ::close(fd);
  return true;
}

std::string read_input_file(const std::string& path, const std::string& what, std::uintmax_t max_bytes) {
  std::string text, why;
  if (!try_read_input_file(path, max_bytes, text, why)) throw std::runtime_error(what + " '" + path + "': " + why);
  return text;
}

std::string yaml_nesting_problem(const std::string& text) {
  int depth = 0, deepest = 0, line = 1;
  std::size_t indent = 0;
  bool at_start = true;
  char quote = 0;
  for (const char c : text) {
    if (c == '\n') {
      ++line, indent = 0, at_start = true;
      if (quote == '\n') quote = 0;  // the comment ends
      continue;
    }
    if (at_start && c == ' ') {
      if (++indent > 4 * kMaxYamlDepth)
        return "line " + std::to_string(line) + " is indented more than " + std::to_string(4 * kMaxYamlDepth) + " spaces";
      continue;
    }
    at_start = false;
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    if (c == '#') quote = '\n';  // a comment runs to the line's end
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if (c == ']' || c == '}') --depth;
    if (deepest > kMaxYamlDepth)
      return "nested more than " + std::to_string(kMaxYamlDepth) + " levels deep (line " + std::to_string(line) + ")";
  }
  return "";
}

}  // namespace minilst
