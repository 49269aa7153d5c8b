#include "results/provenance.hpp"

#include <Kokkos_Core.hpp>
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif
#include <dlfcn.h>
#include <link.h>
#include <sched.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "minilst_build_info.hpp"  // generated: MINILST_VERSION, MINILST_BUILD_TYPE, ...
#include "minilst_git.hpp"         // generated at build time: MINILST_GIT_COMMIT, MINILST_GIT_DIRTY

namespace minilst {

std::string utc_time(bool compact) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, compact ? "%Y%m%dT%H%M%SZ" : "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string version_string() {
  return std::string("minilst ") + MINILST_VERSION + " (git " + MINILST_GIT_COMMIT +
         (MINILST_GIT_DIRTY ? "-dirty" : "") + ")";
}

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The BLAS behind Kokkos Kernels, asked at run time (OpenBLAS names itself).
std::string blas_name() {
  using config_fn = char* (*)();
  if (auto fn = reinterpret_cast<config_fn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) return fn();
  if (dlsym(RTLD_DEFAULT, "mkl_get_version")) return "Intel MKL";
  return "unknown (reference BLAS?)";
}

}  // namespace

ThreadCounts thread_counts() {
  ThreadCounts t;
  t.kokkos = int(Kokkos::DefaultExecutionSpace().concurrency());
  t.kokkos_space = Kokkos::DefaultExecutionSpace::name();
  using count_fn = int (*)();
  if (auto fn = reinterpret_cast<count_fn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"))) t.blas = fn();
#ifdef __linux__
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) t.cores_allowed = CPU_COUNT(&mask);
#endif
  return t;
}

namespace {
// The shared libraries loaded into this process, one path per line.
std::string shared_libraries() {
  std::string out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto& s = *static_cast<std::string*>(data);
        if (info->dlpi_name && info->dlpi_name[0]) s += (s.empty() ? "" : "\n") + std::string(info->dlpi_name);
        return 0;
      },
      &out);
  return out;
}

// This process's CPU affinity as a list of ranges ("0-3,8").
std::string cpu_list() {
  std::string out = "?";
#ifdef __linux__
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return out;
  out.clear();
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &mask)) continue;
    int end = c;
    while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &mask)) ++end;
    out += (out.empty() ? "" : ",") + std::to_string(c) + (end > c ? "-" + std::to_string(end) : "");
    c = end;
  }
#endif
  return out;
}

std::string kokkos_version() {
  return std::to_string(KOKKOS_VERSION / 10000) + "." + std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
         std::to_string(KOKKOS_VERSION % 100);
}
}  // namespace

namespace {
// Every rank's `mine` (up to width - 1 characters), in rank order. Collective.
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine, std::size_t width) {
  int nranks = 1;
  MPI_Comm_size(comm, &nranks);
  std::vector<char> buf(width, '\0'), all(std::size_t(nranks) * width);
  std::copy_n(mine.begin(), std::min(mine.size(), width - 1), buf.begin());
  MPI_Allgather(buf.data(), int(width), MPI_CHAR, all.data(), int(width), MPI_CHAR, comm);
  std::vector<std::string> out;
  for (int r = 0; r < nranks; ++r) out.emplace_back(&all[std::size_t(r) * width]);
  return out;
}

struct CpuFacts {
  std::string model = "unknown", isa;
  long cores = 0;  // physical cores: distinct (physical id, core id); 0 where cpuinfo has no topology
};

// From /proc/cpuinfo: "model name", the vector ISA (x86: the widest of avx512f, avx2, sse4_2;
// +avx512_bf16, +amx) and the physical cores.
CpuFacts cpu_facts() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags, physical;
  CpuFacts c;
  std::set<std::pair<std::string, std::string>> cores;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const auto value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && c.model == "unknown") c.model = value;
    if ((key == "flags" || key == "Features") && flags.empty()) flags = " " + value + " ";
    if (key == "physical id") physical = value;
    if (key == "core id") cores.insert({physical, value});
  }
  c.cores = long(cores.size());
  const auto has = [&](const char* f) { return flags.find(" " + std::string(f) + " ") != std::string::npos; };
  std::string isa = has("avx512f") ? "avx512" : has("avx2") ? "avx2" : has("sse4_2") ? "sse4.2" : has("asimd") ? "neon" : "?";
  if (has("avx512_bf16")) isa += "+avx512_bf16";
  if (has("amx_bf16")) isa += "+amx_bf16";
  if (has("sve")) isa += "+sve";
  c.isa = isa;
  return c;
}

void add_job_keys(std::map<std::string, std::string>& p, MPI_Comm comm, int argc, char** argv) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const auto hosts = gather_strings(comm, host, sizeof host);
  const std::set<std::string> unique(hosts.begin(), hosts.end());
  std::string hostlist, cmdline;
  for (const auto& h : unique) hostlist += (hostlist.empty() ? "" : ",") + h;
  for (int i = 0; i < argc; ++i) cmdline += (i ? " " : "") + std::string(argv[i]);
  const passwd* pw = getpwuid(getuid());
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(mpi_version, &len);
  std::string mpi_lib(mpi_version, std::size_t(len));
  while (!mpi_lib.empty() && (mpi_lib.back() == '\n' || mpi_lib.back() == '\0')) mpi_lib.pop_back();

  p["user"] = pw ? pw->pw_name : env("USER");
  p["launchdate"] = utc_time(false);
  p["executable"] = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "minilst";
  std::error_code ec;
  p["executablepath"] = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  p["workdir"] = std::filesystem::current_path(ec).string();
  p["cmdline"] = cmdline;
  p["hostname"] = host;
  p["clustername"] = env("SLURM_CLUSTER_NAME").empty() ? std::string(host) : env("SLURM_CLUSTER_NAME");
  p["jobsize"] = std::to_string(hosts.size());
  p["numhosts"] = std::to_string(unique.size());
  p["hostlist"] = hostlist;
  p["mpi_library_version"] = mpi_lib;
  // Every rank's CPU binding (its affinity mask), in rank order: "rank 0 on host: 0-1; ..."
  const auto masks = gather_strings(comm, std::string(host) + ": " + cpu_list(), 256);
  std::string binding;
  for (std::size_t r = 0; r < masks.size(); ++r) binding += (r ? "; " : "") + ("rank " + std::to_string(r)) + " on " + masks[r];
  p["cpu_binding"] = binding;
  for (const char* name : {"SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_JOB_NUM_NODES",
                           "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_CPUS_PER_TASK", "SLURM_JOB_NODELIST",
                           "SLURM_JOB_PARTITION", "SLURM_CLUSTER_NAME"})
    if (!env(name).empty()) p[name] = env(name);
}

void add_build_and_machine_keys(std::map<std::string, std::string>& p) {
  p["version"] = MINILST_VERSION;
  p["git_commit"] = MINILST_GIT_COMMIT;
  p["git_dirty"] = MINILST_GIT_DIRTY ? "true" : "false";
  p["compiler"] = MINILST_CXX_COMPILER;
  p["cmake_build_type"] = MINILST_BUILD_TYPE;
  p["host_arch_flag"] = MINILST_HOST_ARCH;
  p["kokkos_version"] = kokkos_version();
  p["kokkos_devices"] = MINILST_KOKKOS_DEVICES;
  p["blas"] = blas_name();
  p["cxx_flags"] = MINILST_CXX_FLAGS;
  p["shared_libraries"] = shared_libraries();
  const auto cpu = cpu_facts();
  const long threads = sysconf(_SC_NPROCESSORS_ONLN);  // the node's online logical CPUs (cores_allowed: this rank's)
  p["cpu_model"] = cpu.model;
  p["cpu_isa"] = cpu.isa;
  p["cpu_cores"] = std::to_string(cpu.cores > 0 ? cpu.cores : threads);
  p["cpu_threads"] = std::to_string(threads);
  p["memory_bytes"] = std::to_string(std::uint64_t(sysconf(_SC_PHYS_PAGES)) * std::uint64_t(sysconf(_SC_PAGE_SIZE)));
  // The run-time environment that changes performance: threads, BLAS, MPI and its transports, NCCL.
  std::string tuning;
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    for (const char* prefix : {"OMP_", "OPENBLAS_", "OMPI_", "UCX_", "NCCL_", "FI_", "KOKKOS_", "MINILST_", "CUDA_"})
      if (var.rfind(prefix, 0) == 0) tuning += (tuning.empty() ? "" : "\n") + var;
  }
  p["environment"] = tuning;
#ifdef KOKKOS_ENABLE_CUDA
  int device = 0, driver = 0, runtime = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&prop, device) == cudaSuccess) p["gpu"] = prop.name;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) p["cuda_driver_version"] = std::to_string(driver);
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) p["cuda_runtime_version"] = std::to_string(runtime);
#endif
}
}  // namespace

std::map<std::string, std::string> collect_provenance(MPI_Comm comm, int argc, char** argv) {
  std::map<std::string, std::string> p;
  add_job_keys(p, comm, argc, argv);
  add_build_and_machine_keys(p);
  return p;
}

}  // namespace minilst
