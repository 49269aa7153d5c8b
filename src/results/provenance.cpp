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

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
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
// Every rank's `mine`, in rank order, whatever their lengths. Collective.
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine) {
  int nranks = 1;
  MPI_Comm_size(comm, &nranks);
  int length = int(mine.size());
  const std::size_t count = std::size_t(nranks);
  std::vector<int> lengths(count), offsets(count, 0);
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm);
  for (int r = 1; r < nranks; ++r) offsets[std::size_t(r)] = offsets[std::size_t(r - 1)] + lengths[std::size_t(r - 1)];
  std::vector<char> all(std::size_t(offsets.back() + lengths.back()) + 1);
  MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, comm);
  std::vector<std::string> out;
  for (int r = 0; r < nranks; ++r)
    out.emplace_back(all.data() + offsets[std::size_t(r)], std::size_t(lengths[std::size_t(r)]));
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

// Seconds since the epoch when this process started (Adiak's launchdate): its start in clock
// ticks after boot (/proc/self/stat) plus the boot time (/proc/stat); where /proc cannot tell,
// the time of the first call.
long launch_time() {
  static const long first_call = long(std::time(nullptr));
  std::ifstream stat("/proc/self/stat"), system("/proc/stat");
  std::string line, word;
  if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) return first_call;
  std::istringstream fields(line.substr(line.rfind(')') + 1));  // after the command name: field 3 on
  long long start_ticks = -1;
  for (int field = 3; fields >> word; ++field)
    if (field == 22) start_ticks = std::atoll(word.c_str());
  long long boot = -1;
  while (system >> word)
    if (word == "btime") system >> boot;
  const long ticks = sysconf(_SC_CLK_TCK);
  if (start_ticks < 0 || boot <= 0 || ticks <= 0) return first_call;
  return long(boot + start_ticks / ticks);
}

// A time in seconds since the epoch as 2026-11-22T10:44:00Z.
std::string utc_text(long seconds) {
  const std::time_t t = seconds;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Adiak's clustername: the host name up to its first '.', without digits ("node12.site" -> "node").
std::string cluster_of(const std::string& host) {
  std::string out;
  for (const char c : host.substr(0, host.find('.')))
    if (c < '0' || c > '9') out += c;
  return out;
}

// The MPI library's vendor and version out of MPI_Get_library_version's text (Adiak's
// mpi_library_vendor and mpi_library_version): the first vendor name found (most specific
// first), and the first dotted number after it; "unknown" where none is found.
std::pair<std::string, std::string> mpi_vendor_version(const std::string& text) {
  static const std::pair<const char*, const char*> vendors[] = {  // name, where its version follows
      {"IBM Spectrum MPI", "Open MPI"}, {"CRAY MPICH", "CRAY MPICH"}, {"Intel(R) MPI Library", "Intel(R) MPI Library"},
      {"MVAPICH2", "MVAPICH2"},         {"MVAPICH", "MVAPICH"},       {"Open MPI", "Open MPI"},
      {"MPICH", "MPICH"}};
  for (const auto& [vendor, anchor] : vendors) {
    const auto at = text.find(anchor);
    if (text.find(vendor) == std::string::npos || at == std::string::npos) continue;
    const auto digit = text.find_first_of("0123456789", at + std::strlen(anchor));
    if (digit == std::string::npos) return {vendor, "unknown"};
    const auto end = text.find_first_not_of("0123456789.", digit);
    std::string version = text.substr(digit, end == std::string::npos ? std::string::npos : end - digit);
    while (!version.empty() && version.back() == '.') version.pop_back();
    return {vendor, version};
  }
  return {"unknown", "unknown"};
}

// The logical CPUs of this process's affinity mask (empty where it cannot be read).
std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
#ifdef __linux__
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
#endif
  return cpus;
}

// The physical core a logical CPU belongs to, named by the first logical CPU on that core
// (sysfs' thread_siblings_list: "0,64" -> 0); the CPU itself where sysfs has no topology.
int core_of(int cpu) {
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
  int first = -1;
  return in >> first && first >= 0 ? first : cpu;
}

std::string join_ints(const std::vector<int>& v, const char* sep) {
  std::string out;
  for (const int x : v) out += (out.empty() ? "" : sep) + std::to_string(x);
  return out;
}

// Where each rank ran, as every rank gathered it: its host, the logical CPUs of its affinity
// mask and the physical cores they belong to (empty: unknown).
struct RankPlace {
  std::string host, cpus;
  std::vector<int> cores;
};

// Collective: every rank's place, in rank order.
std::vector<RankPlace> gather_placement(MPI_Comm comm, const std::string& host) {
  const auto cpus = affinity_cpus();
  std::set<int> cores;
  for (const int c : cpus) cores.insert(core_of(c));
  const std::string mine =
      host + "\t" + cpu_list() + "\t" + join_ints(std::vector<int>(cores.begin(), cores.end()), ",");
  std::vector<RankPlace> out;
  for (const auto& text : gather_strings(comm, mine)) {
    std::istringstream in(text);
    RankPlace r;
    std::string core_list;
    std::getline(in, r.host, '\t');
    std::getline(in, r.cpus, '\t');
    std::getline(in, core_list);
    std::istringstream list(core_list);
    for (std::string c; std::getline(list, c, ',');) r.cores.push_back(std::atoi(c.c_str()));
    out.push_back(std::move(r));
  }
  return out;
}

// The ranks each (host, core) serves, for the cores more than one rank may run on.
std::map<std::pair<std::string, int>, std::vector<int>> shared_cores(const std::vector<RankPlace>& places) {
  std::map<std::pair<std::string, int>, std::vector<int>> users, shared;
  for (std::size_t r = 0; r < places.size(); ++r)
    for (const int c : places[r].cores) users[{places[r].host, c}].push_back(int(r));
  for (auto& [core, ranks] : users)
    if (ranks.size() > 1) shared[core] = ranks;
  return shared;
}

// The placement keys: `placement` (JSON: one object per rank with its host, CPUs, cores and
// the ranks it shares a core with), `cpu_binding` (text), `cores_shared` (yes, no or unknown)
// and `cores_shared_note` (which cores, first few: "core 0 on h: ranks 0 and 2, ...").
void add_placement_keys(std::map<std::string, std::string>& p, const std::vector<RankPlace>& places) {
  const auto shared = shared_cores(places);
  bool known = true;
  std::string binding, note;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (std::size_t r = 0; r < places.size(); ++r) {
    const auto& place = places[r];
    known = known && !place.cores.empty();
    binding += (r ? "; " : "") + ("rank " + std::to_string(r)) + " on " + place.host + ": " + place.cpus;
    std::set<int> partners;
    for (const int c : place.cores)
      if (const auto it = shared.find({place.host, c}); it != shared.end())
        for (const int other : it->second)
          if (other != int(r)) partners.insert(other);
    list.push_back({{"rank", r}, {"host", place.host}, {"cpus", place.cpus}, {"cores", place.cores},
                    {"shares_core_with", std::vector<int>(partners.begin(), partners.end())}});
  }
  int listed = 0;
  for (const auto& [core, ranks] : shared) {
    if (listed++ == 3) {
      note += ", ...";
      break;
    }
    note += (note.empty() ? "" : ", ") + ("core " + std::to_string(core.second) + " on " + core.first + ": ranks " +
                                           join_ints(ranks, " and "));
  }
  p["placement"] = list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  p["cpu_binding"] = binding;
  p["cores_shared"] = !shared.empty() ? "yes" : known ? "no" : "unknown";
  p["cores_shared_note"] = note;
}

void add_job_keys(std::map<std::string, std::string>& p, MPI_Comm comm, int argc, char** argv) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const auto places = gather_placement(comm, host);
  std::set<std::string> unique;  // Adiak's hostlist: the distinct hosts, each up to its first '.'
  for (const auto& place : places) unique.insert(place.host.substr(0, place.host.find('.')));
  std::string hostlist, cmdline;
  for (const auto& h : unique) hostlist += (hostlist.empty() ? "" : ",") + h;
  for (int i = 0; i < argc; ++i) cmdline += (i ? " " : "") + std::string(argv[i]);
  const passwd* pw = getpwuid(getuid());
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0, major = 0, minor = 0;
  MPI_Get_library_version(mpi_version, &len);
  MPI_Get_version(&major, &minor);
  std::string mpi_lib(mpi_version, std::size_t(len));
  while (!mpi_lib.empty() && (mpi_lib.back() == '\n' || mpi_lib.back() == '\0')) mpi_lib.pop_back();
  const auto [vendor, version] = mpi_vendor_version(mpi_lib);
  std::error_code ec;
  const auto exe = std::filesystem::canonical("/proc/self/exe", ec);
  const long launched = launch_time();

  // Adiak's standard keys, with Adiak's meaning (its implicit routines on Linux).
  p["user"] = pw ? pw->pw_name : env("USER");                // the login name
  p["launchdate"] = std::to_string(launched);                // seconds since the epoch, the process's start
  p["launchdate_utc"] = utc_text(launched);                  // the same, for people
  p["executable"] = ec ? "minilst" : exe.filename().string();  // the program file's name
  p["executablepath"] = ec ? "" : exe.string();              // its full path, links resolved
  p["workdir"] = std::filesystem::current_path(ec).string();
  p["cmdline"] = cmdline;
  p["hostname"] = host;
  p["clustername"] = cluster_of(host);                       // the host name without digits (SLURM_CLUSTER_NAME below)
  p["jobsize"] = std::to_string(places.size());              // MPI ranks
  p["numhosts"] = std::to_string(unique.size());             // distinct hosts
  p["hostlist"] = hostlist;
  p["mpi_version"] = std::to_string(major) + "." + std::to_string(minor);  // the MPI standard
  p["mpi_library"] = mpi_lib;                                // MPI_Get_library_version, whole
  p["mpi_library_vendor"] = vendor;
  p["mpi_library_version"] = version;
  add_placement_keys(p, places);
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

std::pair<std::string, std::string> cpu_model_and_isa() {
  const CpuFacts c = cpu_facts();
  return {c.model, c.isa};
}

}  // namespace minilst
