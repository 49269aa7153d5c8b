// The machine file's keys, one row each (as the deck's keys are: io/deck.cpp): its dotted
// pattern, type, unit, floor, whether it is required, whether it is a figure (and so needs a
// provenance), the plausibility rule it is held to, its help, and where its value lives. The
// reader, the writer, the plausibility check, `minilst probe`'s completeness check and
// `minilst keys --machine` all read this table (predict/machine_file.cpp); nothing else names a key.
//   gemm_gflops.<precision>.<gemm_class>: a placeholder part stands for every name of its enum.
#pragma once

#include <array>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "predict/machine_rates.hpp"

namespace minilst {

constexpr const char* kMachineSchema = "minilst-machine";
constexpr int kMachineSchemaVersion = 1;

// A machine file's contents: the rates and what describes them (each field a row's slot below).
struct MachineFile {
  std::string schema = kMachineSchema;
  int schema_version = kMachineSchemaVersion;
  MachineRates rates;
  std::string kind = "measured";  // measured | nominal
  std::string device;             // a nominal file's device (predict/device_facts.hpp), "" : none named
  std::string description, source;
  EnumMap<Precision, double> nominal_gemm{};  // GFLOP/s per rank (the plausibility floor's base); 0: none
  double link_floor_gbs = 0;                  // a link below it is implausible (0: the default floor)
  std::map<std::string, std::string> provenance;  // dotted key -> where its figures come from
  std::vector<std::string> implausible;           // figures flagged (written only under --allow-implausible)
};

// Rows a caller names (error messages, the probe's provenance); the rest are found by pattern.
enum class MachineKey {
  schema, schema_version, name, kind, device, description, source, ranks_per_node,
  gemm_gflops, attention_gflops, attention_heads_per_kv, attention_head_dim, attention_second_head_dim,
  attention_second_gflops, attention_kernel,
  step_scale, step_scale_alone, elementwise_gbs, optimizer_gbs, op_overhead_us, framework_name, framework_layer_hidden,
  framework_layer_heads, framework_layer_intermediate, framework_lm_head, framework_optimizer, host_link_gbs, host_same_memory,
  link_gbs, link_latency_us, link_sync_us, nominal_gemm_gflops, nominal_link_floor_gbs,
  provenance, implausible,
};

enum class KeyType { text, number, whole, flag, texts, text_map };
// When a key must be given: always; `some`: at least one of its expansions; `in_group`: every
// expansion whose group (the key less its last part) appears; optional otherwise.
enum KeyNeed : unsigned { optional = 0, always = 1, some = 2, in_group = 4 };
// The plausibility rule a figure is held to (implausible_figures).
enum class KeyCheck { none, gemm_rate, link_rate, step_scale };

// The indices of a key's placeholder parts, in order (gemm_gflops.bf16.mlp: {bf16, mlp}).
using KeyDims = std::array<int, 3>;
using KeySlot =
    std::variant<double*, int*, std::string*, bool*, std::vector<std::string>*, std::map<std::string, std::string>*>;

struct MachineKeyRow {
  MachineKey id;
  const char* pattern;  // dotted, placeholders in <>
  KeyType type;
  const char* unit;
  double floor;         // numbers: the smallest value accepted
  bool floor_open;      // true: values must exceed the floor
  unsigned need;        // KeyNeed bits
  bool figure;          // a rate or latency: needs a provenance (its key's or a key above it)
  KeyCheck check;
  const char* help;
  KeySlot (*slot)(MachineFile&, const KeyDims&);
};

const std::vector<MachineKeyRow>& machine_key_table();
const MachineKeyRow& machine_key(MachineKey id);
// The names a placeholder part stands for ("<precision>" -> float, double, bf16); empty for a literal part.
const std::vector<std::string>& placeholder_names(const std::string& part);
// The key's text for these dims: machine_key_text(MachineKey::gemm_gflops, {bf16, mlp}) == "gemm_gflops.bf16.mlp".
std::string machine_key_text(MachineKey id, const KeyDims& dims = {0, 0, 0});
// The first `parts` parts of the key's text (a provenance covering a group): machine_key_prefix(
// MachineKey::gemm_gflops, {bf16}, 2) == "gemm_gflops.bf16".
std::string machine_key_prefix(MachineKey id, const KeyDims& dims, int parts);
// Every expansion of the row's pattern: (text, dims), in the order of the placeholders' tables.
std::vector<std::pair<std::string, KeyDims>> expansions(const MachineKeyRow& row);
// `minilst keys --machine`: one line per key (pattern, type, unit, floor, need, help).
std::string machine_keys_text();

}  // namespace minilst
