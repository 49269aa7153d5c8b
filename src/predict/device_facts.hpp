// The devices miniLST knows, in one table: the memory of one device as its driver reports it
// (what `minilst plan --device NAME` budgets) and its datasheet's dense peaks per number
// format (what the MFU is divided by, and what a nominal machine file naming the device is
// checked against).
//   const DeviceFacts* d = find_device("h100-80gb");   d->mib == 81559, d->peak(PeakFormat::bf16) == 989400
#pragma once

#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/names.hpp"

namespace minilst {

// The number formats a datasheet gives a dense peak for: bf16 on the tensor (matrix) cores,
// tf32 (fp32 GEMMs on tensor cores), fp32 on the ordinary units (cuBLAS's SGEMM without TF32,
// what miniLST's float GEMMs run), fp64 (the best dense FP64 rate, tensor cores where they have it).
enum class PeakFormat { bf16, tf32, fp32, fp64 };
template <>
struct EnumNames<PeakFormat> {
  static constexpr std::array<std::pair<PeakFormat, const char*>, 4> table{
      {{PeakFormat::bf16, "bf16"}, {PeakFormat::tf32, "tf32"}, {PeakFormat::fp32, "fp32"}, {PeakFormat::fp64, "fp64"}}};
};
// The format a run's GEMMs use in each precision (float: fp32, as cuBLAS's SGEMM runs without TF32).
PeakFormat peak_format(Precision p);

struct DeviceFacts {
  const char* name;    // --device NAME; a nominal machine file's `device:`
  const char* label;   // the device as its vendor names it
  const char* match;   // the longest row whose `match` is in the CUDA runtime's device name is this device
  double mib;          // capacity per device, MiB (nvidia-smi's memory.total; ROCm's VRAM pool)
  double host_mib;     // > 0: the host memory beside each device (the default --host-mib), MiB
  EnumMap<PeakFormat, double> peak_gflops;  // dense, per device; 0: not on the datasheet cited
  const char* source;  // where the memory figure comes from
  const char* peak_source;  // where the peaks come from
  double peak(PeakFormat f) const { return peak_gflops[f]; }
};

const std::vector<DeviceFacts>& device_table();
const DeviceFacts* find_device(const std::string& name);            // nullptr: no such device
const DeviceFacts* device_of_runtime_name(const std::string& name);  // nullptr: none matches
std::string device_list(const std::string& format);                 // `--device list`: text or json

// The runtime reserve kept off the device budget (CUDA context, NCCL's buffers, the
// allocator's slack) when --reserve-mib is not given: 4096 MiB, or a sixteenth of the
// device where that is less (CPU-scale budgets of a few MiB).
constexpr double kDefaultReserveMiB = 4096;
double default_reserve_mib(double device_mib);

}  // namespace minilst
