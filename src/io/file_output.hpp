// The output rule of the commands that write single files (probe --out, verify --out and
// --export, validate --out), the same as a run's metrics file (io/output_claim.hpp), checked
// before any work starts:
//  - the name is locked (io/output_lock.hpp): a run or another command aimed at it is refused,
//    naming the holder, and so is this one while another holds it;
//  - what is at the name may be replaced only if it is a regular file this process may replace
//    (io/atomic_write.hpp: replace_problem) and one of `kind`'s own earlier outputs (`ours`
//    says so from its first bytes, read without blocking); anything else there (a metrics file,
//    a deck, a symbolic link, a FIFO, a device, a directory) is left alone and the command
//    refused, naming its flag;
//  - the file is written whole, under a temporary name then renamed, and only over the file
//    approved here (one put there since is left alone: OutputTaken).
#pragma once

#include <functional>
#include <string>

#include "io/atomic_write.hpp"
#include "io/input_file.hpp"
#include "io/output_lock.hpp"

namespace minilst {

class FileOutput {
 public:
  // "" when `path` may be written; else why not, starting with `flag`.
  std::string claim(const std::string& path, const std::string& flag, const std::function<bool(const std::string&)>& ours);
  // Writes `text` at the claimed name; throws std::runtime_error naming the flag.
  void write(const std::string& text) const;
  const std::string& path() const { return path_; }
  const std::string& lock_path() const { return lock_.path(); }

 private:
  std::string path_, flag_;
  OutputLock lock_;
};

inline std::string FileOutput::claim(const std::string& path, const std::string& flag,
                                     const std::function<bool(const std::string&)>& ours) {
  path_ = path, flag_ = flag;
  if (path.empty()) return flag + ": an empty name";
  if (auto problem = rename_target_problem(path); !problem.empty()) return flag + ": " + problem;
  if (auto problem = lock_.acquire(path); !problem.empty()) return flag + ": " + problem;
  const FileId there = file_id(path);
  if (!there.exists()) return "";
  if (auto problem = replace_problem(path); !problem.empty()) return flag + ": " + problem;
  std::string text, why;
  if (!try_read_input_file(path, 16 << 20, text, why) || !ours(text))
    return flag + ": '" + path + "' exists and is not an earlier output of this command" + (why.empty() ? "" : " (" + why + ")") +
           ": not replaced (choose another name, or remove it)";
  allow_replacing(path, there);
  return "";
}

inline void FileOutput::write(const std::string& text) const {
  try {
    write_file_atomically(path_, text.data(), text.size());
  } catch (const std::exception& e) {
    throw std::runtime_error(flag_ + ": " + e.what());
  }
}

}  // namespace minilst
