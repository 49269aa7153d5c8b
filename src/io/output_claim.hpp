// Before step 1, the rank that writes the outputs claims their names, so that a run's
// files are its own (docs/metrics.md, "Who owns an output"):
//  - each output (output.metrics, output.dump) is locked (io/output_lock.hpp): a second
//    run aimed at a name a live run holds is refused, naming that run;
//  - each name (the JSON summary's too) is probed for what a rename there cannot or must
//    not do: replace another user's file in a sticky directory, or an immutable or
//    append-only file (io/atomic_write.hpp: replace_problem);
//  - an existing file there, once every check passed (the driver's too: an earlier
//    miniLST output of the same kind, or any regular file under output.overwrite), is
//    the one file the run may replace at that name (io/atomic_write.hpp: allow_replacing);
//  - the temporary files that killed runs of this host left beside a name are removed.
// The locks are released when the claim goes, after the final write.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/atomic_write.hpp"
#include "io/deck.hpp"
#include "io/output_lock.hpp"
#include "io/output_names.hpp"

namespace minilst {

namespace output_claim_detail {
struct ClaimedName {
  std::string key;   // the deck key that names it, for messages
  std::string file;
  bool locked;       // a lock of its own (the JSON summary shares its metrics file's)
};
}  // namespace output_claim_detail

class OutputClaim {
 public:
  // Before the other probes: the locks of the names that can be locked touching nothing
  // else (their directory exists, the name holds nothing or a regular file), so that a
  // second run learns first which run holds a name; then "" when no name holds a file a
  // rename there must not replace; else why not, naming the key, the file and the reason.
  // Notes which file each name holds.
  std::string check(const Deck& deck, const std::string& metrics_path);
  // After them (the directories exist): the other locks taken, and each file noted by
  // check() that is still there unchanged approved (one put there since is not); "" or
  // why not (the run holding a name named).
  std::string take(const Deck& deck, const std::string& metrics_path);

 private:
  using ClaimedName = output_claim_detail::ClaimedName;
  static std::vector<ClaimedName> names_of(const Deck& deck, const std::string& metrics_path);
  static bool lockable_now(const std::string& file);
  // The lock of n, taken unless held already: "" or why not. early: a lock that cannot be
  // created is no refusal yet (the probes that follow say why, in their words).
  std::string lock(const ClaimedName& n, bool early);

  std::map<std::string, OutputLock> locks_;  // name -> its lock
  std::map<std::string, FileId> seen_;       // name -> the file check() found there
};

inline std::vector<output_claim_detail::ClaimedName> OutputClaim::names_of(const Deck& deck,
                                                                         const std::string& metrics_path) {
  std::vector<ClaimedName> names = {{"output.metrics", metrics_path, true},
                                    {"output.metrics (its JSON summary)", json_summary_path(metrics_path), false}};
  if (!deck.output.dump.empty()) names.push_back({"output.dump", deck.output.dump, true});
  return names;
}

inline bool OutputClaim::lockable_now(const std::string& file) {
  namespace fs = std::filesystem;
  const fs::path p(file);
  const auto name = p.filename().string();
  if (file.empty() || file.back() == '/' || name.empty() || name == "." || name == "..") return false;
  std::error_code ec;
  return rename_target_problem(file).empty() && fs::is_directory(fs::absolute(p, ec).parent_path(), ec);
}

inline std::string OutputClaim::lock(const ClaimedName& n, bool early) {
  if (!n.locked || locks_.count(n.file)) return "";
  OutputLock lock;
  if (auto problem = lock.acquire(n.file); !problem.empty())
    return early && !lock.found_a_lock() ? "" : n.key + ": " + problem;
  locks_.emplace(n.file, std::move(lock));
  return "";
}

inline std::string OutputClaim::check(const Deck& deck, const std::string& metrics_path) {
  const auto names = names_of(deck, metrics_path);
  for (const auto& n : names)
    if (lockable_now(n.file))
      if (auto problem = lock(n, true); !problem.empty()) return problem;
  for (const auto& n : names) {
    if (auto problem = replace_problem(n.file); !problem.empty()) return n.key + ": " + problem;
    seen_[n.file] = file_id(n.file);
  }
  return "";
}

inline std::string OutputClaim::take(const Deck& deck, const std::string& metrics_path) {
  const auto names = names_of(deck, metrics_path);
  for (const auto& n : names)
    if (auto problem = lock(n, false); !problem.empty()) return problem;
  for (const auto& n : names) {  // again, now that no other run can write there
    if (auto problem = replace_problem(n.file); !problem.empty()) return n.key + ": " + problem;
    const FileId there = file_id(n.file);
    if (there.exists() && there == seen_[n.file]) allow_replacing(n.file, there);
    remove_stale_partials(n.file);  // a killed run's temporary files: the name is this run's now
    remove_stale_partials(lock_path_of(n.file));
  }
  return "";
}

}  // namespace minilst
