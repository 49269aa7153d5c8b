// Machine files (YAML, docs/time_model.md): a machine's rates per rank, what the time model
// needs (predict/machine_rates.hpp), each figure with its provenance; written by `minilst probe`
// (measured) or by hand from published specifications (nominal, machines/*.yaml); read by
// `minilst plan --machine FILE` and `minilst run --machine FILE`. Its keys are the rows of
// predict/machine_keys.cpp (`minilst keys --machine` lists them).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "predict/machine_keys.hpp"
#include "predict/machine_rates.hpp"

namespace minilst {

// Reads and checks a machine file; throws std::runtime_error naming the file and the key.
// `overrides` ("framework.layer_bytes.intermediate=10") replace or add keys before the checks.
MachineFile load_machine_file(const std::string& path, const std::vector<std::string>& overrides = {});

// The file's text (YAML, comments included), key by key in the table's order.
std::string machine_yaml(const MachineFile& m);

// Writes the text under a temporary name, then renames it (never half a file); throws.
void write_machine_file(const std::string& path, const MachineFile& m);

// The keys the file lacks that the table requires ("" when complete): what `minilst probe`
// checks before it writes.
std::string missing_machine_keys(MachineFile& m);

// The default floor below which a link is implausible: 0.1 GB/s (a misrouted TCP
// fallback over a management network is slower than every interconnect of a cluster).
constexpr double kDefaultLinkFloorGBs = 0.1;

// A step_scale outside this range is implausible: the calibration step ran far slower (or
// faster) than its kernels alone, which says more about the machine's other load than about it.
constexpr double kStepScaleRange[2] = {0.2, 10.0};

// This CPU's nominal GEMM rate per core of a precision (GFLOP/s), by ISA, when no
// nominal figure is given: AVX-512 64 (fp32), 32 (fp64), 128 (bf16 with AVX512_BF16,
// 64 without); AVX2 32, 16, 32; otherwise 8, 4, 8. A measured rate below 1% of it
// times the rank's threads is implausible. GPU builds: 10000 (10 TFLOP/s) per device.
double isa_nominal_gflops(Precision precision, std::string& isa);

// The implausible figures, each as "key: why", by the table's rules: a GEMM rate below 1% of
// nominal (the file's nominal.gemm_gflops, else nominal_default), a link slower than the floor,
// a step_scale outside kStepScaleRange.
std::vector<std::string> implausible_figures(const MachineFile& m, const EnumMap<Precision, double>& nominal_default,
                                             double link_floor_gbs);

}  // namespace minilst
