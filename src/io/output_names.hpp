// The names of a run's output files that follow from the metrics file's name.
#pragma once

#include <filesystem>
#include <string>

namespace minilst {

// The JSON summary beside a metrics file: X.h5 -> X.json, any other name -> name + ".json".
inline std::string json_summary_path(const std::string& metrics_path) {
  std::filesystem::path p(metrics_path);
  if (p.extension() == ".h5") return p.replace_extension(".json").string();
  return metrics_path + ".json";
}

// Where a run writes when its output's name was taken by someone else during the run: beside
// it, tagged with the writing process (host-pid, io/atomic_write.hpp: process_tag), before the
// extension: m.h5 -> m.node17-4711.h5 (attempt 2: m.node17-4711-2.h5); its JSON summary then
// follows it (m.node17-4711.json).
inline std::string sibling_path(const std::string& path, const std::string& tag, int attempt = 1) {
  std::filesystem::path p(path);
  const std::string mark = "." + tag + (attempt > 1 ? "-" + std::to_string(attempt) : std::string());
  const auto stem = p.stem().string(), extension = p.extension().string();
  if (stem.empty() || extension.empty()) return path + mark;  // "m", ".hidden": the mark at the end
  return (p.parent_path() / (stem + mark + extension)).string();
}

// The lock beside an output that says which live run writes it (io/output_lock.hpp).
inline std::string lock_path_of(const std::string& output) { return output + ".lock"; }

}  // namespace minilst
