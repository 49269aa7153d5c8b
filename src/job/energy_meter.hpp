// The energy a run uses, from what the node offers, read at step boundaries:
//   rapl   the CPU packages' RAPL counters through Linux powercap
//          (/sys/class/powercap/intel-rapl:<n>/energy_uj, zones named package-<k>;
//          AMD CPUs too; sampled every 10 s as well, so no wrap is missed), read by one
//          rank per node (they count the whole package: every rank's and the OS's;
//          MINILST_POWERCAP_ROOT names another powercap directory);
//   nvml   the GPU board's energy counter (nvmlDeviceGetTotalEnergyConsumption, from
//          libnvidia-ml loaded at run time), read by one rank per GPU (CUDA builds);
//   Slurm  the job step's ConsumedEnergyRaw (sstat) where the cluster gathers energy:
//          once at the start and once at the end (its sampling is coarse), as an attribute.
// A source counts only where every node (every GPU) offers it, and a GPU run counts only
// with its GPUs' energy; otherwise the run's energy is "unavailable" with the reason.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "core/attributes.hpp"

namespace minilst {

class EnergyMeter {
 public:
  explicit EnergyMeter(MPI_Comm comm);  // collective: probes every rank's sources, agrees on one verdict
  ~EnergyMeter();
  EnergyMeter(const EnergyMeter&) = delete;
  EnergyMeter& operator=(const EnergyMeter&) = delete;

  // Joules this rank's meters counted since the previous call (or since construction); 0 when it reads none.
  double joules_since_last();
  // "rapl", "nvml", "rapl+nvml", or "unavailable"; the note says what was read or why nothing was.
  const std::string& source() const { return source_; }
  const std::string& note() const { return note_; }
  // The GPU driver, and with ask_slurm (rank 0, at the end; not collective) the Slurm step's
  // energy since construction, as attributes.
  RunAttributes attributes(bool ask_slurm);

 private:
  struct Rapl;
  struct Nvml;
  std::unique_ptr<Rapl> rapl_;  // null where this rank does not read RAPL
  std::unique_ptr<Nvml> nvml_;  // null where this rank does not read a GPU
  std::string source_ = "unavailable", note_;
  double slurm_start_joules_ = -1;  // rank 0: sstat's reading at the start (-1: none)
  std::string gpu_driver_;
};

}  // namespace minilst
