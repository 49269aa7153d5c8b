#include "predict/device_facts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

namespace minilst {

PeakFormat peak_format(Precision p) {
  return p == Precision::bf16 ? PeakFormat::bf16 : p == Precision::float64 ? PeakFormat::fp64 : PeakFormat::fp32;
}

namespace {
// GFLOP/s, dense (half a datasheet's "with sparsity" figure): bf16, tf32, fp32, fp64.
EnumMap<PeakFormat, double> peaks(double bf16, double tf32, double fp32, double fp64) {
  EnumMap<PeakFormat, double> p;
  p[PeakFormat::bf16] = bf16, p[PeakFormat::tf32] = tf32, p[PeakFormat::fp32] = fp32, p[PeakFormat::fp64] = fp64;
  return p;
}
constexpr const char* kSmi = "nvidia-smi memory.total";
}  // namespace

const std::vector<DeviceFacts>& device_table() {
  // Capacity per device as the driver reports it (nvidia-smi --query-gpu=memory.total, in MiB;
  // the CUDA runtime's own total, cudaMemGetInfo's, is about 0.5 GiB less on an H100, inside the
  // reserve); the figures as these devices print them in public nvidia-smi and rocminfo output.
  // Peaks from each vendor's datasheet, dense, per device.
  static const std::vector<DeviceFacts> table = {
      {"h100-80gb", "NVIDIA H100 80GB HBM3 (SXM5)", "H100", 81559, 0, peaks(989000, 494000, 67000, 67000), kSmi,
       "H100 SXM5 datasheet: BF16 989, TF32 494, FP32 67, FP64 tensor core 67 TFLOP/s"},
      {"h100-94gb", "NVIDIA H100 NVL (94 GB HBM3)", "H100 NVL", 95830, 0, peaks(835500, 417500, 60000, 60000), kSmi,
       "H100 NVL datasheet, per GPU: BF16 835.5, TF32 417.5, FP32 60, FP64 tensor core 60 TFLOP/s"},
      {"a100-40gb", "NVIDIA A100 40GB (SXM4)", "A100-SXM4-40GB", 40960, 0, peaks(312000, 156000, 19500, 19500), kSmi,
       "A100 datasheet: BF16 312, TF32 156, FP32 19.5, FP64 tensor core 19.5 TFLOP/s"},
      {"a100-80gb", "NVIDIA A100 80GB (SXM4)", "A100", 81920, 0, peaks(312000, 156000, 19500, 19500), kSmi,
       "A100 datasheet: BF16 312, TF32 156, FP32 19.5, FP64 tensor core 19.5 TFLOP/s"},
      {"h200", "NVIDIA H200 (141 GB HBM3e, SXM)", "H200", 143771, 0, peaks(989000, 494000, 67000, 67000), kSmi,
       "H200 datasheet (SXM): BF16 989, TF32 494, FP32 67, FP64 tensor core 67 TFLOP/s"},
      {"gh200", "NVIDIA GH200 480GB (96 GB HBM3 + 480 GB LPDDR5X)", "GH200", 97871, 457763,
       peaks(989000, 494000, 67000, 67000),
       "nvidia-smi memory.total; host: the Grace CPU's 480 GB (480e9 bytes, NVIDIA's datasheet)",
       "GH200 datasheet, the Hopper GPU: BF16 989, TF32 494, FP32 67, FP64 tensor core 67 TFLOP/s"},
      {"b200", "NVIDIA B200 (180 GB HBM3e, HGX)", "B200", 183359, 0, peaks(2250000, 1125000, 0, 40000), kSmi,
       "HGX B200 specifications, per GPU: BF16 2.25 PFLOP/s, TF32 1.125 PFLOP/s, FP64 40 TFLOP/s (FP32: not cited)"},
      {"mi300x", "AMD Instinct MI300X (192 GB HBM3)", "MI300X", 196592, 0, peaks(1307400, 653700, 163400, 163400),
       "rocminfo: the GPU's coarse-grained global pool, 201310208 KB",
       "MI300X data sheet: BF16 1307.4, TF32 653.7, FP32 vector 163.4, FP64 matrix 163.4 TFLOP/s"},
      {"h100-pcie", "NVIDIA H100 PCIe (80 GB HBM2e)", "H100 PCIe", 81559, 0, peaks(756000, 378000, 51000, 51000), kSmi,
       "H100 PCIe datasheet: BF16 756, TF32 378, FP32 51, FP64 tensor core 51 TFLOP/s"},
      {"a800-80gb", "NVIDIA A800 80GB (SXM4)", "A800", 81920, 0, peaks(312000, 156000, 19500, 19500), kSmi,
       "A800 datasheet (an A100 with a 400 GB/s NVLink): BF16 312, TF32 156, FP32 19.5, FP64 tensor core 19.5 TFLOP/s"},
  };
  return table;
}

const DeviceFacts* find_device(const std::string& name) {
  for (const auto& d : device_table())
    if (name == d.name) return &d;
  return nullptr;
}

const DeviceFacts* device_of_runtime_name(const std::string& name) {
  const DeviceFacts* best = nullptr;
  for (const auto& d : device_table())
    if (name.find(d.match) != std::string::npos && (!best || std::strlen(d.match) > std::strlen(best->match))) best = &d;
  return best;
}

std::string device_list(const std::string& format) {
  if (format == "json") {
    nlohmann::ordered_json devices = nlohmann::ordered_json::array();
    for (const auto& d : device_table()) {
      nlohmann::ordered_json peak;
      for (const PeakFormat f : all_of<PeakFormat>()) peak[name_of(f)] = d.peak(f);
      devices.push_back({{"name", d.name}, {"label", d.label}, {"capacity_mib", std::llround(d.mib)}, {"host_mib", std::llround(d.host_mib)},
                         {"source", d.source}, {"peak_gflops", peak}, {"peak_source", d.peak_source}});
    }
    return nlohmann::ordered_json{{"default_reserve_mib", int(kDefaultReserveMiB)}, {"devices", devices}}.dump() + "\n";
  }
  std::string out = "device presets (minilst plan DECK --device NAME): the memory of one device as its driver reports it\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-10s %9s %9s  %-50s %s\n", "name", "MiB", "host MiB", "device", "source");
  out += line;
  for (const auto& d : device_table()) {
    std::snprintf(line, sizeof line, "  %-10s %9.0f %9s  %-50s %s\n", d.name, d.mib,
                  d.host_mib > 0 ? std::to_string(long(d.host_mib)).c_str() : "-", d.label, d.source);
    out += line;
  }
  std::snprintf(line, sizeof line,
                "the device budget per rank is the device less --reserve-mib (default %.0f MiB, or a sixteenth of the "
                "device where that is less) for the CUDA context, NCCL's buffers and the allocator; a preset with host "
                "memory is the default --host-mib\n",
                kDefaultReserveMiB);
  return out + line;
}

double default_reserve_mib(double device_mib) { return std::min(kDefaultReserveMiB, device_mib / 16.0); }

}  // namespace minilst
