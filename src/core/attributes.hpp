// Facts about a run, by type, as the metrics file stores them (root attributes):
// every part that decides or measures something reports it in one of these, and
// the metrics record (io/run_record.hpp) collects them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace minilst {

struct RunAttributes {
  std::map<std::string, std::string> text;
  std::map<std::string, std::int64_t> integers;
  std::map<std::string, double> reals;

  void merge(const RunAttributes& other) {
    for (const auto& [k, v] : other.text) text[k] = v;
    for (const auto& [k, v] : other.integers) integers[k] = v;
    for (const auto& [k, v] : other.reals) reals[k] = v;
  }
};

}  // namespace minilst
