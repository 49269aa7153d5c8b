#include "results/mfu_peak.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "parallel/broadcast.hpp"
#include "results/provenance.hpp"

namespace minilst {

namespace {

constexpr double kReplaceAbove = 1.10;  // a run measuring 10% more than the stored peak replaces it

std::string cache_dir() {
  if (const char* d = std::getenv("MINILST_CACHE"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/minilst";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/minilst";
}

// mkdir -p: true when the directory exists afterwards.
bool make_dirs(const std::string& dir) {
  for (std::size_t at = 1; at <= dir.size(); ++at)
    if (at == dir.size() || dir[at] == '/') ::mkdir(dir.substr(0, at).c_str(), 0755);
  struct stat st {};
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

nlohmann::json read_store(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    return j.is_object() ? j : nlohmann::json::object();
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json::object();  // a damaged cache is measured again
  }
}

// Under a temporary name, then renamed: a reader never sees half a file.
bool write_store(const std::string& path, const nlohmann::json& j) {
  const auto slash = path.rfind('/');
  if (slash != std::string::npos && !make_dirs(path.substr(0, slash))) return false;
  const std::string tmp = path + "." + std::to_string(long(::getpid())) + ".tmp";
  {
    std::ofstream out(tmp);
    if (!(out << j.dump(2) << "\n")) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0 || (std::remove(tmp.c_str()), false);
}

std::string rate_text(double gflops) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GFLOP/s", gflops);
  return text;
}

// Rank 0: the answer and, where due, the store rewritten.
MfuPeak decide(double measured, const std::string& key, bool node_quiet) {
  const std::string path = host_peak_store();
  nlohmann::json store = read_store(path);
  const nlohmann::json* entry = store.contains(key) && store[key].is_object() ? &store[key] : nullptr;
  const double stored = entry && (*entry)["gflops"].is_number() ? (*entry)["gflops"].get<double>() : 0.0;
  if (stored > 0 && !(node_quiet && measured > kReplaceAbove * stored))
    return {stored, "host", "host peak measured once (" + (*entry).value("measured", std::string("?")) + ") and stored in " +
                                path + ": " + rate_text(stored) + " per rank"};
  if (!node_quiet)
    return {measured, "run", "this run's GEMM rate (the node was busy while it was measured: not stored in " + path + ")"};
  store[key] = {{"gflops", measured}, {"measured", utc_time(false)}, {"replaced", stored}};
  if (!write_store(path, store)) return {measured, "run", "this run's GEMM rate (" + path + " cannot be written)"};
  return {measured, "host", "host peak measured in this run and stored in " + path + ": " + rate_text(measured) +
                                " per rank" + (stored > 0 ? " (replacing " + rate_text(stored) + ", measured low)" : "")};
}

}  // namespace

std::string host_peak_store() { return cache_dir() + "/host_peaks.json"; }

std::string host_peak_key(const std::string& precision, const std::string& gemm_path, int threads_per_rank,
                          int ranks_per_node) {
  const auto p = cpu_model_and_isa();
  std::ostringstream key;
  key << p.first << " | " << p.second << " | " << precision << " | " << gemm_path << " | " << threads_per_rank
      << " thread(s) per rank | " << ranks_per_node << " rank(s) per node";
  return key.str();
}

MfuPeak host_mfu_peak(double measured, const std::string& key, bool node_quiet, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MfuPeak peak;
  if (rank == 0) peak = decide(measured, key, node_quiet);
  MPI_Bcast(&peak.gflops, 1, MPI_DOUBLE, 0, comm);
  peak.kind = broadcast_string(peak.kind, comm);
  peak.source = broadcast_string(peak.source, comm);
  return peak;
}

}  // namespace minilst
