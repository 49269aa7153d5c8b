#include "job/energy_meter.hpp"

#include <Kokkos_Macros.hpp>  // KOKKOS_ENABLE_CUDA
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif
#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "job/slurm_ids.hpp"
#include "job/subprocess.hpp"

namespace minilst {

namespace {
namespace fs = std::filesystem;

bool read_number(const fs::path& file, double& value) {
  std::ifstream in(file);
  return static_cast<bool>(in >> value);
}
}  // namespace

// The node's CPU packages: the top-level powercap zones intel-rapl:<n> named
// package-<k> (their sub-zones, intel-rapl:<n>:<m>, are parts of a package, and a
// psys zone contains the packages: neither is added again). A counter wraps at
// max_energy_range_uj (about 65 kJ on AMD: 160 s at 400 W), so a sampler thread reads
// every zone every 10 s and accumulates: a long step cannot hide a second wrap.
struct EnergyMeter::Rapl {
  struct Zone {
    fs::path energy;
    double range_uj = 0, last_uj = 0;
  };
  std::vector<Zone> zones;
  std::string problem;  // why RAPL cannot be read ("" when it can)
  std::mutex mutex;     // guards zones' last_uj, joules, stop
  std::condition_variable wake;
  double joules = 0;    // accumulated since the last take
  bool stop = false;
  std::thread sampler;

  Rapl() {
    const char* elsewhere = std::getenv("MINILST_POWERCAP_ROOT");  // sysfs mounted elsewhere (containers), or a test's copy
    const fs::path root = elsewhere && *elsewhere ? elsewhere : "/sys/class/powercap";
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      problem = "no RAPL: this kernel offers no " + root.string();
      return;
    }
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      const std::string dir = entry.path().filename().string();
      if (dir.rfind("intel-rapl:", 0) != 0 || dir.find(':', 11) != std::string::npos) continue;
      std::string name;
      std::ifstream(entry.path() / "name") >> name;
      if (name.rfind("package", 0) != 0) continue;  // psys, dram (outside a package on some servers): not counted
      Zone z{entry.path() / "energy_uj"};
      if (!read_number(entry.path() / "max_energy_range_uj", z.range_uj) || !read_number(z.energy, z.last_uj)) {
        problem = "RAPL counters not readable (" + z.energy.string() + ": root only on most kernels)";
        return;
      }
      zones.push_back(z);
    }
    if (zones.empty()) {
      problem = "no RAPL package zone (intel-rapl:<n> named package-<k>) in " + root.string();
      return;
    }
    sampler = std::thread([this] {
      std::unique_lock<std::mutex> lock(mutex);
      while (!wake.wait_for(lock, std::chrono::seconds(10), [this] { return stop; })) accumulate();
    });
  }
  ~Rapl() {
    if (!sampler.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    wake.notify_all();
    sampler.join();
  }

  void accumulate() {  // with the mutex held; a counter that wrapped since the last read is unwrapped
    for (auto& z : zones) {
      double now = z.last_uj;
      if (!read_number(z.energy, now)) continue;
      joules += (now >= z.last_uj ? now - z.last_uj : now + z.range_uj - z.last_uj) * 1e-6;
      z.last_uj = now;
    }
  }
  double joules_since_last() {
    std::lock_guard<std::mutex> lock(mutex);
    accumulate();
    return std::exchange(joules, 0.0);
  }
};

// One GPU's board energy through NVML, loaded at run time (no link-time dependency;
// the few C entry points below are NVML's stable ABI: handles are pointers, results ints).
struct EnergyMeter::Nvml {
  using Device = void*;
  void* lib = nullptr;
  int (*shutdown)() = nullptr;
  int (*total_energy)(Device, unsigned long long*) = nullptr;  // mJ since the driver loaded
  Device device = nullptr;
  unsigned long long last_mj = 0;
  bool initialised = false;
  std::string problem, driver;

  explicit Nvml(const std::string& pci_bus_id) {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      problem = "no NVML (libnvidia-ml.so.1 not found)";
      return;
    }
    const auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    const auto by_bus = reinterpret_cast<int (*)(const char*, Device*)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    const auto driver_version = reinterpret_cast<int (*)(char*, unsigned)>(dlsym(lib, "nvmlSystemGetDriverVersion"));
    shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
    total_energy = reinterpret_cast<int (*)(Device, unsigned long long*)>(dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
    initialised = init && by_bus && shutdown && total_energy && init() == 0;
    if (!initialised) {
      problem = "NVML present but not usable (nvmlInit failed or symbols missing)";
      total_energy = nullptr;
      return;
    }
    char version[96] = {};
    if (driver_version && driver_version(version, sizeof version) == 0) driver = version;
    if (by_bus(pci_bus_id.c_str(), &device) != 0 || total_energy(device, &last_mj) != 0) {
      problem = "NVML cannot read the energy of GPU " + pci_bus_id + " (needs Volta or newer)";
      total_energy = nullptr;
    }
  }
  ~Nvml() {
    if (initialised) shutdown();
    if (lib) dlclose(lib);
  }
  double joules_since_last() {
    unsigned long long now = last_mj;
    if (!total_energy || total_energy(device, &now) != 0) return 0;
    const double joules = now >= last_mj ? double(now - last_mj) * 1e-3 : 0.0;  // a driver reload restarts it
    last_mj = now;
    return joules;
  }
};

namespace {
// This rank's GPU as a PCI bus id ("" on host builds).
std::string gpu_bus_id() {
#ifdef KOKKOS_ENABLE_CUDA
  int device = 0;
  char id[32] = {};
  if (cudaGetDevice(&device) == cudaSuccess && cudaDeviceGetPCIBusId(id, sizeof id, device) == cudaSuccess) return id;
#endif
  return "";
}

// Whether every rank's `mine` is true, and the first false rank's problem. Collective.
std::pair<bool, std::string> everywhere(MPI_Comm comm, bool mine, const std::string& problem) {
  int all = mine ? 1 : 0, rank = 0, first_bad = mine ? 1 << 30 : 0;
  MPI_Comm_rank(comm, &rank);
  if (!mine) first_bad = rank;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_LAND, comm);
  MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, comm);
  if (all) return {true, ""};
  char why[256] = {};
  if (rank == first_bad) std::snprintf(why, sizeof why, "%s", problem.c_str());
  MPI_Bcast(why, sizeof why, MPI_CHAR, first_bad, comm);
  return {false, why};
}

// The Slurm job step's ConsumedEnergyRaw in joules, or -1 where it is not gathered
// (sstat prints nothing, 0, or Slurm's "no value", 2^64 - 2).
double slurm_step_joules() {
  const std::string job = safe_slurm_id("SLURM_JOB_ID"), step = safe_slurm_id("SLURM_STEP_ID");
  if (job.empty() || step.empty()) return -1;
  const std::string text = run_command(
      {"sstat", "--noheader", "--parsable2", "--format=ConsumedEnergyRaw", "-j", job + "." + step}, 10.0);
  char* end = nullptr;
  const double joules = std::strtod(text.c_str(), &end);
  return end != text.c_str() && joules > 0 && joules < 9.2e18 ? joules : -1;
}
}  // namespace

EnergyMeter::EnergyMeter(MPI_Comm comm) {
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  // RAPL: the node's first rank reads the packages.
  auto rapl = node_rank == 0 ? std::make_unique<Rapl>() : nullptr;
  const auto [rapl_ok, rapl_problem] = everywhere(comm, !rapl || rapl->problem.empty(), rapl ? rapl->problem : "");
  // NVML: the first rank on each GPU reads it (ranks that share a GPU count it once).
  const std::string bus = gpu_bus_id();
  bool gpu_reader = !bus.empty();
  {
    int nnode = 1;
    MPI_Comm_size(node, &nnode);
    std::vector<char> mine(32, '\0'), all(std::size_t(nnode) * 32);
    bus.copy(mine.data(), 31);
    MPI_Allgather(mine.data(), 32, MPI_CHAR, all.data(), 32, MPI_CHAR, node);
    for (int r = 0; r < node_rank && gpu_reader; ++r) gpu_reader = bus != std::string(&all[std::size_t(r) * 32]);
  }
  MPI_Comm_free(&node);
  auto nvml = gpu_reader ? std::make_unique<Nvml>(bus) : nullptr;
  int any_gpu = bus.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &any_gpu, 1, MPI_INT, MPI_LOR, comm);
  const auto [nvml_ok, nvml_problem] = everywhere(comm, !nvml || nvml->problem.empty(), nvml ? nvml->problem : "");
  if (nvml) gpu_driver_ = nvml->driver;

  // A GPU run counts its GPUs: without NVML the CPU packages alone would flatter its tokens per joule.
  const bool use_nvml = any_gpu && nvml_ok, use_rapl = rapl_ok && (!any_gpu || use_nvml);
  if (use_rapl) rapl_ = std::move(rapl);
  if (use_nvml) nvml_ = std::move(nvml);
  source_ = use_rapl && use_nvml ? "rapl+nvml" : use_rapl ? "rapl" : use_nvml ? "nvml" : "unavailable";
  if (use_rapl) note_ = "CPU packages through powercap, one reader per node";
  if (use_nvml) note_ += std::string(note_.empty() ? "" : "; ") + "GPU boards through NVML, one reader per GPU";
  if (!rapl_ok) note_ += std::string(note_.empty() ? "" : "; ") + rapl_problem;
  if (any_gpu && !use_nvml)
    note_ += std::string(note_.empty() ? "" : "; ") + nvml_problem + " (a GPU run's energy needs its GPUs')";
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) slurm_start_joules_ = slurm_step_joules();
}

EnergyMeter::~EnergyMeter() = default;

double EnergyMeter::joules_since_last() {
  return (rapl_ ? rapl_->joules_since_last() : 0.0) + (nvml_ ? nvml_->joules_since_last() : 0.0);
}

RunAttributes EnergyMeter::attributes(bool ask_slurm) {
  RunAttributes a;
  if (!gpu_driver_.empty()) a.text["gpu_driver_version"] = gpu_driver_;
  if (!ask_slurm) return a;
  const double end = slurm_start_joules_ >= 0 ? slurm_step_joules() : -1;
  if (end > slurm_start_joules_ && slurm_start_joules_ >= 0) {
    a.reals["slurm_energy_joules"] = end - slurm_start_joules_;
    a.text["slurm_energy"] = "sstat ConsumedEnergyRaw of the job step, from the start of the run to its last record";
  } else {
    a.text["slurm_energy"] = std::getenv("SLURM_STEP_ID") ? "unavailable: the cluster gathers no energy (sstat "
                                                            "ConsumedEnergyRaw empty or 0)"
                                                          : "unavailable: not a Slurm job step";
  }
  return a;
}

}  // namespace minilst
