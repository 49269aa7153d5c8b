// Machine files (YAML, docs/time_model.md): a machine's rates per rank, what the time
// model needs (model/time_model.hpp), each figure with its provenance; written by
// `minilst probe` (measured) or by hand from published specifications (nominal,
// machines/*.yaml); read by `minilst plan --machine FILE`.
//   schema: minilst-machine, schema_version: 1, name, kind (measured | nominal),
//   description, source, ranks_per_node, gemm_gflops.<precision>.<square|projection|mlp|lm_head>,
//   attention_gflops.<precision>.<forward|backward>, attention_probe.{heads_per_kv, head_dim,
//   kernel.<precision>} and step_scale.<precision>.<attention|mlp|lm_head|other|optimizer>
//   (both optional; the probe writes them), elementwise_gbs, optimizer_gbs (optional), op_overhead_us,
//   host_link.{gbs, same_memory}, links.<intra_node|inter_node>.<op>.{gbs, latency_us, sync_us (optional)},
//   nominal.{gemm_gflops.<precision>, link_floor_gbs} (the plausibility references),
//   provenance.<key> (a key's text covers every figure under it), implausible (a list).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/time_model.hpp"

namespace minilst {

constexpr const char* kMachineSchema = "minilst-machine";
constexpr int kMachineSchemaVersion = 1;

struct MachineFile {
  MachineRates rates;
  std::string kind = "measured";  // measured | nominal
  std::string description, source;
  std::map<std::string, double> nominal_gemm;  // precision -> GFLOP/s per rank (the 1% plausibility floor's base)
  double link_floor_gbs = 0;                   // a link below it is implausible (0: the default floor)
  std::map<std::string, std::string> provenance;  // dotted key -> where its figures come from
  std::vector<std::string> implausible;           // figures flagged (written only under --allow-implausible)
};

// Reads and checks a machine file; throws std::runtime_error naming the file and the key.
MachineFile load_machine_file(const std::string& path);

// The file's text (YAML, comments included).
std::string machine_yaml(const MachineFile& m);

// Writes the text under a temporary name, then renames it (never half a file); throws.
void write_machine_file(const std::string& path, const MachineFile& m);

// The default floor below which a link is implausible: 0.1 GB/s (a misrouted TCP
// fallback over a management network is slower than every interconnect of a cluster).
constexpr double kDefaultLinkFloorGBs = 0.1;

// A step_scale outside this range is implausible: the calibration step ran far slower (or
// faster) than its kernels alone, which says more about the machine's other load than about it.
constexpr double kStepScaleRange[2] = {0.25, 4.0};

// This CPU's nominal GEMM rate per core of a precision (GFLOP/s), by ISA, when no
// nominal figure is given: AVX-512 64 (fp32), 32 (fp64), 128 (bf16 with AVX512_BF16,
// 64 without); AVX2 32, 16, 32; otherwise 8, 4, 8. A measured rate below 1% of it
// times the rank's threads is implausible. GPU builds: 10000 (10 TFLOP/s) per device.
double isa_nominal_gflops(const std::string& precision, std::string& isa);

// The implausible figures: a GEMM rate below 1% of nominal (the file's nominal.gemm_gflops,
// else nominal_default), a link slower than the floor, a step_scale outside kStepScaleRange; each as "key: why".
std::vector<std::string> implausible_figures(const MachineFile& m, const std::map<std::string, double>& nominal_default,
                                             double link_floor_gbs);

}  // namespace minilst
