// Files a run leaves are whole or absent, and never replace what is not the run's.
// Each is written under a temporary name unique to its writer (host, pid, a random
// part; created exclusively), synced, then given its final name by a rename that
// refuses to replace an existing file unless it is the one this process may replace:
// the file it wrote there itself, or the file approved before step 1 (an earlier
// run's output, or any regular file under output.overwrite: io/output_claim.hpp).
// Anything else at the final name was put there by someone else during the run: the
// write throws OutputTaken and the caller writes to a sibling name instead.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace minilst {

// The final name holds a file this process may not replace (left untouched).
class OutputTaken : public std::runtime_error {
 public:
  OutputTaken(const std::string& path, const std::string& why);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One file as it was seen: device and inode (ino 0: no file), and its size and
// modification time, so that a file written over in place (`echo x > m.json`) is
// another file than the one this run left there.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  long long mtime_ns = 0;
  bool exists() const { return ino != 0; }
  bool operator==(const FileId& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
  }
  bool operator!=(const FileId& o) const { return !(*this == o); }
};
FileId file_id(const std::string& path);  // the entry itself (a link is not followed); {} when absent

// This host's name as names carry it: its first label, characters other than
// [A-Za-z0-9_-] as '_' ("node17").
const std::string& host_tag();
// host_tag() and the pid: "node17-4711", the part of a name that tells which run wrote it.
const std::string& process_tag();
// 8 random hex digits, fresh on every call.
std::string random_part();
// ".<host>-<pid>-<random part>.partial", fresh on every call: a temporary name's suffix.
std::string unique_partial_suffix();

// Whether `path` may be the target of that rename: "" when it is absent or a regular
// file; else why not (a symbolic link, which a rename would replace and a write would
// follow; a directory, device, pipe or socket).
std::string rename_target_problem(const std::string& path);
// Why this run may not replace the existing file at `path`, "" when absent or allowed:
// it belongs to another user in a sticky directory (mode 1777: only its owner may
// replace it, root included here), or it is immutable or append-only (chattr +i, +a).
std::string replace_problem(const std::string& path);

// `file` (as file_id(path) saw it) may be replaced by this process's next write at `path`
// (approved before step 1). Thread-safe, like the queries below.
void allow_replacing(const std::string& path, FileId file);
// Whether a write to `path` now would take the final name: nothing there, or the file
// this process may replace.
bool may_write(const std::string& path);
// Removes `path` if it is still the file this process wrote there (Owned::written), or
// the one it may replace (also the file approved before step 1); moved aside and checked
// there first, so that a file put at `path` meanwhile is never removed. True when removed.
enum class Owned { written, written_or_approved };
bool remove_if_owned(const std::string& path, Owned which = Owned::written);

// Whether the process `pid` of this host is gone: no such process, or a zombie (ended, not
// yet reaped by its parent, a launcher that is itself going away).
bool process_gone(long pid);

// Removes the temporary files `<path>.<host>-<pid>-<random part>.partial` that processes
// of this host left beside `path` and that are gone (a run killed while it wrote); how
// many were removed. Only for a name this run holds the lock of (io/output_lock.hpp).
int remove_stale_partials(const std::string& path);

// Renames `from` to `to` only if `to` does not exist: renameat2(RENAME_NOREPLACE), or
// link() + unlink() where the file system has no such rename. 0, or the errno (EEXIST:
// `to` exists and nothing changed).
int rename_noreplace(const std::string& from, const std::string& to);

// `size` bytes written to path + partial_suffix (created exclusively, never through a
// link), synced, and given the name `path` under the rules above; the directory synced.
// Throws OutputTaken when `path` holds a file this process may not replace, else
// std::runtime_error with the reason; the temporary name is removed either way.
void write_file_atomically(const std::string& path, const char* data, std::size_t size,
                           const std::string& partial_suffix = unique_partial_suffix());

}  // namespace minilst
