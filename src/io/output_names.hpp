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

}  // namespace minilst
