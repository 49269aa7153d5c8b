// One live run per output name. Beside the output, `<name>.lock` (output_names.hpp:
// lock_path_of) says which run writes it, in one line:
//   minilst-lock host=node17 pid=4711 pid_start=123456 started=2026-05-01T10:00:00Z token=9f3a2c1b
// (pid_start: the process's start time in clock ticks after boot, /proc/<pid>/stat, which
// tells a reused pid from the run's). It is created exclusively, whole: written under a
// temporary name and given the lock's name by a rename that never replaces
// (io/atomic_write.hpp: rename_noreplace). A lock of this host whose process is gone is
// stale and is taken over; a lock of another host is trusted (its run may be alive: the
// refusal says to remove the lock if it is not). Released (removed, if it is still this
// run's) when the OutputLock goes; a run killed with SIGKILL leaves a stale lock.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>

#include "io/atomic_write.hpp"
#include "io/input_file.hpp"
#include "io/output_names.hpp"

namespace minilst {

class OutputLock {
 public:
  OutputLock() = default;
  ~OutputLock() { release(); }
  OutputLock(OutputLock&& other) noexcept;
  OutputLock& operator=(OutputLock&& other) noexcept;
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  // Takes the lock of `output`: "" when taken, else why not (the run holding it named:
  // host, pid, start time; or why the lock could not be created).
  std::string acquire(const std::string& output);
  // After a refusal: whether a lock file was there (a run's, or one naming no run), rather
  // than the lock not being creatable at all (no such directory, no permission).
  bool found_a_lock() const { return found_a_lock_; }
  // Removes the lock file if it is still this one's.
  void release();
  bool held() const { return !content_.empty(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;     // <output>.lock
  std::string content_;  // what this run wrote there ("" = not held)
  bool found_a_lock_ = false;
};

// The lock's parts (used by OutputLock only).
namespace output_lock_detail {

inline std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "unknown";
  return host;
}

// A process's start time in clock ticks after boot (/proc/<pid>/stat, field 22); -1 when unknown.
inline long long start_ticks(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = stat.rfind(')');  // the command name may hold blanks and parentheses
  if (paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)
    if (i == 22) return std::atoll(field.c_str());
  return -1;
}

inline std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// What a lock file says of its run.
struct LockRecord {
  bool valid = false;
  std::string host, started = "?", token;
  long pid = 0;
  long long pid_start = -1;

  std::string describe() const {
    return "host " + host + ", pid " + std::to_string(pid) + ", started " + started;
  }
};

// Linux's largest pid (PID_MAX_LIMIT on 64-bit kernels).
constexpr long kMaxPid = 4194304;

// A decimal of digits alone that fits a long long; `fallback` otherwise.
inline long long whole_or(const std::string& text, long long fallback) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) return fallback;
  return std::stoll(text);
}

inline LockRecord parse(const std::string& text) {
  std::istringstream in(text);
  std::string word;
  LockRecord r;
  if (!(in >> word) || word != "minilst-lock") return r;
  while (in >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    if (key == "host") r.host = value;
    if (key == "pid") r.pid = whole_or(value, -1);
    if (key == "pid_start") r.pid_start = whole_or(value, -1);
    if (key == "started") r.started = value;
    if (key == "token") r.token = value;
  }
  r.valid = !r.host.empty() && r.pid > 0 && r.pid <= kMaxPid;  // a pid no Linux process can have names no run
  return r;
}

// Stale: written on this host by a process that is gone, or whose pid now names another process.
inline bool stale(const LockRecord& r) {
  if (r.host != host_name()) return false;  // another host's process cannot be asked
  if (process_gone(r.pid)) return true;
  const long long now = start_ticks(r.pid);
  return r.pid_start >= 0 && now >= 0 && now != r.pid_start;
}

inline std::string this_run_record() {
  return "minilst-lock host=" + host_name() + " pid=" + std::to_string(::getpid()) +
         " pid_start=" + std::to_string(start_ticks(::getpid())) + " started=" + utc_now() +
         " token=" + random_part() + "\n";
}

// A lock is one short line; what is at its name is read without blocking and never past 4 KiB
// (io/input_file.hpp): false and `why` when it is gone or is not a lock-sized regular file.
constexpr std::uintmax_t kMaxLockBytes = 4096;
inline bool read_text(const std::string& path, std::string& text, std::string* why = nullptr) {
  std::string reason;
  const bool ok = try_read_input_file(path, kMaxLockBytes, text, reason);
  if (why) *why = reason;
  return ok;
}

// `content` under the name `path`, whole, only if nothing is there: 0 or the errno (EEXIST).
inline int create_whole(const std::string& path, const std::string& content) {
  const std::string temp = path + unique_partial_suffix();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  const bool written = ::write(fd, content.data(), content.size()) == ssize_t(content.size()) && ::fsync(fd) == 0;
  const int write_error = errno;
  ::close(fd);
  const int err = written ? rename_noreplace(temp, path) : write_error;
  if (err != 0) ::unlink(temp.c_str());
  return err;
}

// Removes the stale lock `path` that read `seen`: moved aside first, and given back if what
// was moved is no longer that lock (another run took it over meanwhile). "" or why not;
// `removed`: the stale lock is gone.
inline std::string take_over(const std::string& path, const std::string& seen, bool& removed) {
  removed = false;
  const std::string aside = path + unique_partial_suffix();  // a temporary name: cleaned up if this run dies here
  if (std::rename(path.c_str(), aside.c_str()) != 0)
    return errno == ENOENT ? "" : "cannot remove the stale lock '" + path + "': " + std::strerror(errno);
  std::string moved;
  removed = read_text(aside, moved) && moved == seen;
  if (removed || rename_noreplace(aside, path) != 0) ::unlink(aside.c_str());
  return "";
}

}  // namespace output_lock_detail

inline OutputLock::OutputLock(OutputLock&& other) noexcept { *this = std::move(other); }

inline OutputLock& OutputLock::operator=(OutputLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    content_ = std::exchange(other.content_, std::string());
    found_a_lock_ = other.found_a_lock_;
  }
  return *this;
}

inline std::string OutputLock::acquire(const std::string& output) {
  using namespace output_lock_detail;
  release();
  path_ = lock_path_of(output);
  found_a_lock_ = true;  // every refusal below but the first is about a lock file found there
  const std::string mine = this_run_record();
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int err = create_whole(path_, mine);
    if (err == 0) {
      content_ = mine;
      return "";
    }
    if (err != EEXIST) {
      found_a_lock_ = false;
      return "cannot create the lock '" + path_ + "': " + std::strerror(err);
    }
    std::string seen, why;
    if (!read_text(path_, seen, &why)) {
      if (why == "not found") continue;  // released meanwhile: try again
      return "'" + path_ + "' is in the way of the lock of '" + output + "': " + why + " (remove it if no run is writing '" +
             output + "')";
    }
    const LockRecord holder = parse(seen);
    if (!holder.valid)
      return "'" + path_ + "' exists and names no miniLST run: remove it if no run is writing '" + output + "'";
    if (!stale(holder)) {
      const bool here = holder.host == host_name();
      return "'" + output + "' is being written by another miniLST run (" + holder.describe() + "; lock '" + path_ +
             "'): choose another name" +
             (here ? ", or wait until that run ends" : "; if that run has ended, remove '" + path_ + "'");
    }
    bool removed = false;
    if (auto problem = take_over(path_, seen, removed); !problem.empty()) return problem;
    if (removed)
      std::fprintf(stderr, "note: removed the stale lock '%s' of a run that ended (%s)\n", path_.c_str(),
                   holder.describe().c_str());
  }
  return "cannot take the lock '" + path_ + "': other runs keep taking it";
}

inline void OutputLock::release() {
  if (content_.empty()) return;
  using output_lock_detail::read_text;
  std::string there;
  if (read_text(path_, there) && there == content_) ::unlink(path_.c_str());
  content_.clear();
}

}  // namespace minilst
