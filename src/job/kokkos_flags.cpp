#include "job/kokkos_flags.hpp"

#include <algorithm>
#include <cstdlib>
#include <cctype>
#include <dlfcn.h>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

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

// Why `lib` cannot serve as a Kokkos Tools library, or "": it must load (an ELF shared
// object whose dependencies resolve; dlerror names what fails) and export a Kokkos Tools
// entry point, else Kokkos would start without the tool and without a word. The check
// loads it the way Kokkos will moments later, then unloads it.
std::string tools_library_problem(const std::string& lib) {
  dlerror();
  void* handle = dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return "the tools library '" + lib + "' is not a loadable shared library (" + (why ? why : "dlopen failed") + ")";
  }
  bool tool = false;
  for (const char* entry : {"kokkosp_init_library", "kokkosp_finalize_library", "kokkosp_begin_parallel_for",
                            "kokkosp_push_profile_region", "kokkosp_allocate_data", "kokkosp_request_tool_settings"})
    tool = tool || dlsym(handle, entry) != nullptr;
  dlclose(handle);
  if (!tool)
    return "the tools library '" + lib + "' exports no Kokkos Tools entry point (kokkosp_init_library, ...): "
           "Kokkos would run no tool";
  return "";
}

// A ';'-separated list of tools libraries: each given with a '/' must be a file that loads as a
// Kokkos Tools library; a bare name is searched for by the loader, and checked where it finds one.
std::string library_problem(const std::string& list) {
  std::istringstream in(list);
  for (std::string lib; std::getline(in, lib, ';');) {
    if (lib.empty()) continue;  // "a.so;": Kokkos skips it too
    if (lib.find('/') == std::string::npos) {  // a bare name: the loader searches for it
      void* found = dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL);
      if (!found) continue;  // not on the loader's path here: Kokkos says so when it cannot load it
      dlclose(found);
    } else {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(lib, ec)) return "the tools library '" + lib + "' is not a file";
    }
    if (const auto problem = tools_library_problem(lib); !problem.empty()) return problem;
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

namespace {
// A whole number of digits alone (at most 12 of them), or -1.
long long digits_value(const std::string& text) {
  if (text.empty() || text.size() > 12 || !std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); }))
    return -1;
  return std::stoll(text);
}

std::string thread_count_problem(const char* name, const std::string& value, bool list) {
  const long long limit = std::max<long long>(256, 4LL * std::max(1u, std::thread::hardware_concurrency()));
  std::istringstream in(value);
  int parts = 0;
  for (std::string part; std::getline(in, part, ',');) {
    const long long n = digits_value(part);
    if (n < 1 || n > limit || (++parts > 1 && !list))
      return std::string(name) + "='" + value + "': expected " + (list ? "whole numbers" : "a whole number") +
             " in [1, " + std::to_string(limit) + "] (4 x this node's hardware threads, or 256)";
  }
  return parts == 0 ? std::string(name) + "='" + value + "': expected a whole number >= 1" : "";
}
}  // namespace

std::string environment_problem() {
  const auto get = [](const char* name) -> const char* { return std::getenv(name); };
  for (const char* name : {"KOKKOS_TOOLS_LIBS", "KOKKOS_PROFILE_LIBRARY"})
    if (const char* v = get(name); v && *v)
      if (const auto problem = library_problem(v); !problem.empty()) return std::string(name) + ": " + problem;
  if (const char* v = get("OMP_NUM_THREADS"); v && *v)
    if (auto problem = thread_count_problem("OMP_NUM_THREADS", v, true); !problem.empty()) return problem;
  for (const char* name : {"OPENBLAS_NUM_THREADS", "KOKKOS_NUM_THREADS"})
    if (const char* v = get(name); v && *v)
      if (auto problem = thread_count_problem(name, v, false); !problem.empty()) return problem;
  if (const char* v = get("SLURM_JOB_END_TIME"); v && digits_value(v) < 0)
    return std::string("SLURM_JOB_END_TIME='") + v + "': expected Unix seconds (digits), as Slurm sets it: the run "
           "could not watch its job's end";
  if (const char* v = get("SLURM_STEP_NUM_TASKS"); v && digits_value(v) < 1)
    return std::string("SLURM_STEP_NUM_TASKS='") + v + "': expected a task count, as Slurm sets it";
  return "";
}

}  // namespace minilst
