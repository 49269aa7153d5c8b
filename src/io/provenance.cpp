#include "io/provenance.hpp"

#include <Kokkos_Core.hpp>
#include <dlfcn.h>
#include <sched.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
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
std::string kokkos_version() {
  return std::to_string(KOKKOS_VERSION / 10000) + "." + std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
         std::to_string(KOKKOS_VERSION % 100);
}
}  // namespace

std::map<std::string, std::string> collect_provenance(MPI_Comm comm, int argc, char** argv) {
  std::map<std::string, std::string> p;
  int nranks = 1;
  MPI_Comm_size(comm, &nranks);

  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::vector<char> hosts(std::size_t(nranks) * sizeof host);
  MPI_Allgather(host, sizeof host, MPI_CHAR, hosts.data(), sizeof host, MPI_CHAR, comm);
  std::set<std::string> unique;
  for (int r = 0; r < nranks; ++r) unique.insert(std::string(&hosts[std::size_t(r) * sizeof host]));
  std::string hostlist;
  for (const auto& h : unique) hostlist += (hostlist.empty() ? "" : ",") + h;

  std::string cmdline;
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
  p["jobsize"] = std::to_string(nranks);
  p["numhosts"] = std::to_string(unique.size());
  p["hostlist"] = hostlist;
  p["mpi_library_version"] = mpi_lib;

  p["version"] = MINILST_VERSION;
  p["git_commit"] = MINILST_GIT_COMMIT;
  p["git_dirty"] = MINILST_GIT_DIRTY ? "true" : "false";
  p["compiler"] = MINILST_CXX_COMPILER;
  p["cmake_build_type"] = MINILST_BUILD_TYPE;
  p["host_arch_flag"] = MINILST_HOST_ARCH;
  p["kokkos_version"] = kokkos_version();
  p["kokkos_devices"] = MINILST_KOKKOS_DEVICES;
  p["blas"] = blas_name();

  for (const char* name : {"SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_JOB_NUM_NODES",
                           "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_CPUS_PER_TASK", "SLURM_JOB_NODELIST",
                           "SLURM_JOB_PARTITION", "SLURM_CLUSTER_NAME"})
    if (!env(name).empty()) p[name] = env(name);
  return p;
}

}  // namespace minilst
