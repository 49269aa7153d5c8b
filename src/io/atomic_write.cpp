#include "io/atomic_write.hpp"

#include <fcntl.h>
#include <linux/fs.h>  // FS_IOC_GETFLAGS, FS_IMMUTABLE_FL, FS_APPEND_FL
#include <pwd.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

namespace minilst {

namespace fs = std::filesystem;

OutputTaken::OutputTaken(const std::string& path, const std::string& why)
    : std::runtime_error("'" + path + "' is not this run's to replace: " + why), path_(path) {}

namespace {
FileId id_of(const struct stat& st) {
  return {st.st_dev, st.st_ino, st.st_size, (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
}
}  // namespace

FileId file_id(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return id_of(st);
}

const std::string& host_tag() {
  static const std::string tag = [] {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "host");
    std::string name(host, std::strcspn(host, "."));
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
    return name.empty() ? std::string("host") : name;
  }();
  return tag;
}

const std::string& process_tag() {
  static const std::string tag = host_tag() + "-" + std::to_string(::getpid());
  return tag;
}

std::string random_part() {
  static std::mutex mutex;
  static std::mt19937_64 random = [] {
    std::seed_seq seed{std::uint64_t(std::random_device{}()), std::uint64_t(::getpid()),
                       std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count())};
    return std::mt19937_64(seed);
  }();
  std::lock_guard<std::mutex> lock(mutex);
  char part[9];
  std::snprintf(part, sizeof part, "%08x", unsigned(random() & 0xffffffffu));
  return part;
}

std::string unique_partial_suffix() { return "." + process_tag() + "-" + random_part() + ".partial"; }

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

std::string user_name(uid_t uid) {
  struct passwd pw {}, *found = nullptr;
  char buffer[1024];
  if (::getpwuid_r(uid, &pw, buffer, sizeof buffer, &found) == 0 && found) return found->pw_name;
  return "uid " + std::to_string(uid);
}

std::string parent_directory(const std::string& path) {
  std::error_code ec;
  const auto dir = fs::absolute(path, ec).parent_path();
  return dir.empty() ? std::string(".") : dir.string();
}

// "" or why: the sticky directory's rule (only a file's owner may replace it there).
std::string sticky_problem(const std::string& path, const struct stat& file) {
  const std::string dir = parent_directory(path);
  struct stat d {};
  if (::stat(dir.c_str(), &d) != 0 || !(d.st_mode & S_ISVTX) || file.st_uid == ::geteuid()) return "";
  return "'" + path + "' belongs to user " + user_name(file.st_uid) + " in the sticky directory '" + dir +
         "' (mode 1777): only its owner may replace it";
}

// "" or why: the file's immutable or append-only attribute (which no user, root included, can rename over).
std::string attribute_problem(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return "";  // unreadable: the rename itself decides
  int flags = 0;
  const bool known = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  ::close(fd);
  if (known && (flags & FS_IMMUTABLE_FL)) return "'" + path + "' is immutable (chattr +i): it cannot be replaced";
  if (known && (flags & FS_APPEND_FL)) return "'" + path + "' is append-only (chattr +a): it cannot be replaced";
  return "";
}

}  // namespace

std::string replace_problem(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  if (auto problem = sticky_problem(path, st); !problem.empty()) return problem;
  return attribute_problem(path);
}

namespace {

// What this process may replace at each final name (absolute, normalised): the file
// approved before step 1, then the file it wrote there itself.
struct Allowance {
  FileId file;
  bool written = false;  // by this process (else approved before step 1)
};
struct Replaceable {
  std::mutex mutex;
  std::map<std::string, Allowance> files;
};
Replaceable& replaceable() {
  static Replaceable r;
  return r;
}
std::string key_of(const std::string& path) {
  std::error_code ec;
  const auto p = fs::absolute(path, ec);
  return (ec ? fs::path(path) : p).lexically_normal().string();
}
Allowance allowance_at(const std::string& path) {  // the caller holds the mutex
  const auto it = replaceable().files.find(key_of(path));
  return it == replaceable().files.end() ? Allowance{} : it->second;
}
FileId allowed_at(const std::string& path) { return allowance_at(path).file; }

int renameat2_call(const std::string& from, const std::string& to, unsigned flags) {
#ifdef SYS_renameat2
  if (::syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags) == 0) return 0;
  return errno;
#else
  (void)from, (void)to, (void)flags;
  return ENOSYS;
#endif
}
bool unsupported(int err) { return err == EINVAL || err == ENOSYS || err == ENOTSUP || err == EOPNOTSUPP; }

enum class Exchange { replaced, not_expected, failed };

// Replaces `to` (expected to be the file `expected`) by `from` without a moment where a
// third file could be lost: the two are swapped, and the displaced one (now at `from`)
// is checked; a file that is not the expected one is given its name back. Where the file
// system cannot swap, a plain rename (the caller has just checked `to`).
Exchange replace_exchanging(const std::string& from, const std::string& to, FileId expected, int& err) {
  err = renameat2_call(from, to, RENAME_EXCHANGE);
  if (unsupported(err)) {
    err = std::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
    return err == 0 ? Exchange::replaced : Exchange::failed;
  }
  if (err != 0) return Exchange::failed;
  if (file_id(from) == expected) {
    ::unlink(from.c_str());
    return Exchange::replaced;
  }
  err = renameat2_call(from, to, RENAME_EXCHANGE);  // someone else's file: back under its name
  return err == 0 ? Exchange::not_expected : Exchange::failed;
}

// Gives the synced temporary file `temp` (the file `written`) the name `path` under the
// rules of the header. Throws; the caller removes `temp` unless told it holds another's file.
void give_name(const std::string& temp, const std::string& path, FileId written, bool& temp_is_ours) {
  std::lock_guard<std::mutex> lock(replaceable().mutex);
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (auto problem = rename_target_problem(path); !problem.empty()) throw OutputTaken(path, problem);
    const FileId there = file_id(path);
    if (!there.exists()) {
      const int err = rename_noreplace(temp, path);
      if (err == EEXIST) continue;  // it appeared since: judged like any file there
      if (err != 0) throw std::runtime_error("cannot rename '" + temp + "' to '" + path + "': " + std::strerror(err));
      replaceable().files[key_of(path)] = {written, true};
      return;
    }
    if (there != allowed_at(path)) throw OutputTaken(path, "a file was put there by someone else during the run");
    if (auto problem = replace_problem(path); !problem.empty()) throw OutputTaken(path, problem);
    int err = 0;
    switch (replace_exchanging(temp, path, there, err)) {
      case Exchange::replaced:
        replaceable().files[key_of(path)] = {written, true};
        return;
      case Exchange::not_expected:
        continue;  // the new file there is judged on the next attempt
      case Exchange::failed:
        if (file_id(temp) != written) temp_is_ours = false;  // the swap back failed: another's file is at temp
        if (err == EPERM || err == EACCES) throw OutputTaken(path, std::strerror(err));
        throw std::runtime_error("cannot rename '" + temp + "' to '" + path + "': " + std::strerror(err) +
                                 (temp_is_ours ? "" : " (the file that was there is now '" + temp + "')"));
    }
  }
  throw OutputTaken(path, "other files keep appearing there");
}

void fsync_directory(const std::string& path) {  // best effort: the rename is made durable
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void allow_replacing(const std::string& path, FileId file) {
  std::lock_guard<std::mutex> lock(replaceable().mutex);
  replaceable().files[key_of(path)] = {file, false};
}

bool may_write(const std::string& path) {
  std::lock_guard<std::mutex> lock(replaceable().mutex);
  const FileId there = file_id(path);
  return !there.exists() || there == allowed_at(path);
}

bool remove_if_owned(const std::string& path, Owned which) {
  std::lock_guard<std::mutex> lock(replaceable().mutex);
  const Allowance allowed = allowance_at(path);
  replaceable().files.erase(key_of(path));
  const FileId mine = allowed.file;
  if ((!allowed.written && which == Owned::written) || !mine.exists() || file_id(path) != mine) return false;
  // Moved aside first and checked there, so that a file put at `path` meanwhile is never removed.
  const std::string aside = path + unique_partial_suffix();  // a temporary name: cleaned up if this run dies here
  if (std::rename(path.c_str(), aside.c_str()) != 0) return false;
  if (file_id(aside) == mine) return ::unlink(aside.c_str()) == 0;
  if (rename_noreplace(aside, path) != 0)
    std::fprintf(stderr, "warning: a file put at '%s' is now '%s' (a name was taken meanwhile)\n", path.c_str(),
                 aside.c_str());
  return false;
}

int rename_noreplace(const std::string& from, const std::string& to) {
  const int err = renameat2_call(from, to, RENAME_NOREPLACE);
  if (!unsupported(err)) return err;
  if (::link(from.c_str(), to.c_str()) == 0) {  // link() never replaces either
    ::unlink(from.c_str());
    return 0;
  }
  if (errno != EPERM && !unsupported(errno)) return errno;
  // No hard links either (some FUSE and FAT file systems): checked, then renamed.
  if (file_id(to).exists()) return EEXIST;
  return std::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

namespace {
// The pid in "<host_tag>-<pid>-<8 hex digits>" when the host is this one's; 0 otherwise.
long pid_of_our_tag(const std::string& tag) {
  const std::string host = host_tag() + "-";
  if (tag.compare(0, host.size(), host) != 0) return 0;
  const std::string rest = tag.substr(host.size());  // <pid>-<hex>
  const auto dash = rest.find('-');
  if (dash == std::string::npos || dash == 0 || rest.size() - dash - 1 != 8) return 0;
  if (rest.find_first_not_of("0123456789") != dash) return 0;
  return std::atol(rest.substr(0, dash).c_str());
}
}  // namespace

bool process_gone(long pid) {
  if (::kill(pid_t(pid), 0) != 0 && errno == ESRCH) return true;
  std::FILE* stat = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!stat) return false;  // no /proc: alive as far as kill() can tell
  char text[512] = {};
  const std::size_t n = std::fread(text, 1, sizeof text - 1, stat);
  std::fclose(stat);
  const char* paren = std::strrchr(text, ')');  // "<pid> (<command>) <state> ..."
  return n > 0 && paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

int remove_stale_partials(const std::string& path) {
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".", suffix = ".partial";
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(parent_directory(path), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const long pid = pid_of_our_tag(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
    if (pid > 0 && process_gone(pid) && ::unlink(entry.path().c_str()) == 0) ++removed;
  }
  return removed;
}

void write_file_atomically(const std::string& path, const char* data, std::size_t size,
                           const std::string& partial_suffix) {
  const std::string temp = path + partial_suffix;
  const auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    ::unlink(temp.c_str());
    throw std::runtime_error("cannot " + what + " '" + temp + "': " + reason);
  };
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    const std::string reason = std::strerror(errno);  // not ours: never removed
    throw std::runtime_error("cannot create '" + temp + "': " + reason);
  }
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      fail("write");
    }
    done += std::size_t(n);
  }
  struct stat st {};
  if (::fsync(fd) != 0 || ::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("write to disk");
  }
  if (::close(fd) != 0) fail("close");
  bool temp_is_ours = true;
  try {
    give_name(temp, path, id_of(st), temp_is_ours);
  } catch (...) {
    if (temp_is_ours) ::unlink(temp.c_str());
    throw;
  }
  fsync_directory(parent_directory(path));
}

}  // namespace minilst
