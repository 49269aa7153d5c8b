#include "job/kokkos_flags.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <sstream>

namespace minilst {

namespace {

enum class Value { none, count, index, devices, device_map, boolean, library, text };

const std::map<std::string, Value>& known_flags() {
  static const std::map<std::string, Value> flags = {
      {"help", Value::none},           {"threads", Value::count},         {"num-threads", Value::count},
      {"numa", Value::count},          {"device-id", Value::index},       {"device", Value::index},
      {"num-devices", Value::devices}, {"ndevices", Value::devices},      {"skip-device", Value::index},
      {"map-device-id-by", Value::device_map}, {"disable-warnings", Value::boolean},
      {"print-configuration", Value::boolean}, {"tune-internals", Value::boolean},
      {"tools-libs", Value::library},  {"tools-library", Value::library}, {"tools-args", Value::text},
      {"tools-help", Value::none}};
  return flags;
}

bool digits(const std::string& s) {
  return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// A ';'-separated list of tools libraries: each given with a '/' must be a file.
std::string library_problem(const std::string& list) {
  std::istringstream in(list);
  for (std::string lib; std::getline(in, lib, ';');) {
    if (lib.find('/') == std::string::npos) continue;  // a bare name: the loader searches for it
    std::error_code ec;
    if (!std::filesystem::is_regular_file(lib, ec)) return "the tools library '" + lib + "' is not a file";
  }
  return "";
}

std::string value_problem(Value kind, const std::string& v) {
  switch (kind) {
    case Value::none: return "takes no value";
    case Value::count: return digits(v) && std::stol(v) >= 1 ? "" : "expects an integer >= 1";
    case Value::index: return digits(v) ? "" : "expects an integer >= 0";
    case Value::devices: {  // N or N,M (Kokkos 3.x: N devices, skipping device M)
      const auto comma = v.find(',');
      const bool ok = comma == std::string::npos ? digits(v) : digits(v.substr(0, comma)) && digits(v.substr(comma + 1));
      return ok ? "" : "expects N or N,M (integers)";
    }
    case Value::device_map: return v == "random" || v == "mpi_rank" ? "" : "expects random or mpi_rank";
    case Value::boolean: {
      static const char* words[] = {"true", "false", "1", "0", "yes", "no", "on", "off"};
      return std::any_of(std::begin(words), std::end(words), [&](const char* w) { return v == w; })
                 ? ""
                 : "expects true or false";
    }
    case Value::library: return v.empty() ? "expects a library" : library_problem(v);
    case Value::text: return "";
  }
  return "";
}

}  // namespace

std::string kokkos_flag_problem(const std::string& arg) {
  const std::string prefix = "--kokkos-";
  if (arg.rfind(prefix, 0) != 0) return "not a --kokkos-* flag";
  const auto eq = arg.find('=');
  const std::string name = arg.substr(prefix.size(), eq == std::string::npos ? std::string::npos : eq - prefix.size());
  const auto it = known_flags().find(name);
  if (it == known_flags().end()) return "unknown Kokkos flag";
  if (eq == std::string::npos) {
    if (it->second == Value::none || it->second == Value::boolean) return "";
    return "needs a value: " + prefix + name + "=...";
  }
  const auto problem = value_problem(it->second, arg.substr(eq + 1));
  return problem.empty() ? "" : prefix + name + " " + problem;
}

}  // namespace minilst
