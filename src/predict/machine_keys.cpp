#include "predict/machine_keys.hpp"

#include <cstdio>
#include <map>
#include <stdexcept>

#include "kernels/attention_tiles.hpp"

namespace minilst {

namespace {
// Shorthands for the rows below: the rates, the file, and an enum from a dim.
template <class E>
E at(const KeyDims& d, int i) {
  return E(d[std::size_t(i)]);
}
using F = MachineFile;
using D = const KeyDims&;
constexpr double kOpen = 0;  // floor 0, exclusive: a positive number
using K = MachineKey;
using T = KeyType;
using C = KeyCheck;
// The table: one row per key, in the order the writer writes them.
// clang-format off
const std::vector<MachineKeyRow> kRows = {
    {K::schema, "schema", T::text, "", 0, false, always, false, C::none, "minilst-machine",
     [](F& m, D) -> KeySlot { return &m.schema; }},
    {K::schema_version, "schema_version", T::whole, "", 1, false, always, false, C::none, "1",
     [](F& m, D) -> KeySlot { return &m.schema_version; }},
    {K::name, "name", T::text, "", 0, false, always, false, C::none, "the machine's name",
     [](F& m, D) -> KeySlot { return &m.rates.name; }},
    {K::kind, "kind", T::text, "", 0, false, always, false, C::none, "measured (minilst probe) or nominal (specifications)",
     [](F& m, D) -> KeySlot { return &m.kind; }},
    {K::device, "device", T::text, "", 0, false, optional, false, C::none,
     "the device of a nominal file (minilst plan --device list): its datasheet peaks check nominal.gemm_gflops",
     [](F& m, D) -> KeySlot { return &m.device; }},
    {K::description, "description", T::text, "", 0, false, optional, false, C::none, "the machine in words",
     [](F& m, D) -> KeySlot { return &m.description; }},
    {K::source, "source", T::text, "", 0, false, always, false, C::none,
     "where the figures come from: the probe's command, hosts and date; or the specifications",
     [](F& m, D) -> KeySlot { return &m.source; }},
    {K::ranks_per_node, "ranks_per_node", T::whole, "ranks", 1, false, always, false, C::none,
     "ranks that share a node's links; a collective of more ranks uses links.inter_node",
     [](F& m, D) -> KeySlot { return &m.rates.ranks_per_node; }},
    {K::gemm_gflops, "gemm_gflops.<precision>.<gemm_class>", T::number, "GFLOP/s", kOpen, true, some | in_group, true,
     C::gemm_rate, "dense GEMM, GFLOP/s per rank, by precision and shape class (tokens x out x in)",
     [](F& m, D d) -> KeySlot { return &m.rates.gemm_gflops[at<Precision>(d, 0)][at<GemmClass>(d, 1)]; }},
    {K::attention_gflops, "attention_gflops.<precision>.<pass>", T::number, "GFLOP/s", kOpen, true, some | in_group, true,
     C::none, "causal flash attention, useful GFLOP/s per rank (4 FLOPs per causal pair and head dim forward, 10 backward)",
     [](F& m, D d) -> KeySlot { return &m.rates.attention_gflops[at<Precision>(d, 0)][at<AttentionPass>(d, 1)]; }},
    {K::attention_heads_per_kv, "attention_probe.heads_per_kv", T::whole, "", 1, false, in_group, false, C::none,
     "the attention figures' query heads per kv head (other head counts are priced by the kernel's tiles)",
     [](F& m, D) -> KeySlot { return &m.rates.attention_heads_per_kv; }},
    {K::attention_head_dim, "attention_probe.head_dim", T::whole, "", 1, false, in_group, false, C::none,
     "the attention figures' head dim",
     [](F& m, D) -> KeySlot { return &m.rates.attention_head_dim; }},
    {K::attention_second_head_dim, "attention_probe.second_head_dim", T::whole, "", 2, false, optional, false, C::none,
     "the head dim of attention_second_gflops (two points price every head dim)",
     [](F& m, D) -> KeySlot { return &m.rates.attention_second_head_dim; }},
    {K::attention_second_gflops, "attention_second_gflops.<precision>.<pass>", T::number, "GFLOP/s", kOpen, true,
     optional, true, C::none, "attention_gflops of the same kernel at attention_probe.second_head_dim",
     [](F& m, D d) -> KeySlot { return &m.rates.attention_second_gflops[at<Precision>(d, 0)][at<AttentionPass>(d, 1)]; }},
    {K::attention_kernel, "attention_probe.kernel.<precision>", T::text, "", 0, false, optional, false, C::none,
     "the attention kernel that ran, per precision",
     [](F& m, D d) -> KeySlot { return &m.rates.attention_kernel[at<Precision>(d, 0)]; }},
    {K::step_scale, "step_scale.<precision>.<family>", T::number, "", kOpen, true, optional, true, C::step_scale,
     "a training step's phase time over the same phase priced from the rates (the probe's calibration step)",
     [](F& m, D d) -> KeySlot { return &m.rates.step_scale[at<Precision>(d, 0)][at<PhaseFamily>(d, 1)]; }},
    {K::step_scale_alone, "step_scale_alone.<precision>.<family>", T::number, "", kOpen, true, optional, true,
     C::step_scale, "step_scale with one rank of the node at work and the others idle (the probe's calibration step again)",
     [](F& m, D d) -> KeySlot { return &m.rates.step_scale_alone[at<Precision>(d, 0)][at<PhaseFamily>(d, 1)]; }},
    {K::elementwise_gbs, "elementwise_gbs", T::number, "GB/s", kOpen, true, always, true, C::none,
     "a streaming kernel's bytes read + written per second",
     [](F& m, D) -> KeySlot { return &m.rates.elementwise_gbs; }},
    {K::optimizer_gbs, "optimizer_gbs", T::number, "GB/s", kOpen, true, optional, true, C::none,
     "AdamW's bytes per second over the model states (elementwise_gbs where absent)",
     [](F& m, D) -> KeySlot { return &m.rates.optimizer_gbs; }},
    {K::op_overhead_us, "op_overhead_us", T::number, "us", 0, false, always, true, C::none,
     "the fixed cost of one kernel call (launch, fence)",
     [](F& m, D) -> KeySlot { return &m.rates.op_overhead_us; }},
    {K::framework_name, "framework.name", T::text, "", 0, false, optional, false, C::none,
     "the training software whose elementwise traffic framework.* counts (absent: miniLST's kernels)",
     [](F& m, D) -> KeySlot { return &m.rates.framework_name; }},
    {K::framework_layer_hidden, "framework.layer_bytes.hidden", T::number, "B", kOpen, true, optional, true,
     C::none, "one layer's forward elementwise bytes per token and hidden unit (norms, residuals, casts)",
     [](F& m, D) -> KeySlot { return &m.rates.framework.hidden; }},
    {K::framework_layer_heads, "framework.layer_bytes.heads", T::number, "B", 0, false, optional, true, C::none,
     "one layer's forward elementwise bytes per token and q or kv head dim (RoPE, layout copies)",
     [](F& m, D) -> KeySlot { return &m.rates.framework.heads; }},
    {K::framework_layer_intermediate, "framework.layer_bytes.intermediate", T::number, "B", 0, false, optional, true,
     C::none, "one layer's forward elementwise bytes per token and MLP intermediate unit (the activation)",
     [](F& m, D) -> KeySlot { return &m.rates.framework.intermediate; }},
    {K::framework_lm_head, "framework.lm_head_bytes", T::number, "B", kOpen, true, optional, true, C::none,
     "the loss's elementwise bytes per token and vocabulary entry, forward + backward (casts, softmax)",
     [](F& m, D) -> KeySlot { return &m.rates.framework.lm_head; }},
    {K::framework_optimizer, "framework.optimizer_bytes", T::number, "B", kOpen, true, optional, true, C::none,
     "the optimizer step's bytes read + written per parameter",
     [](F& m, D) -> KeySlot { return &m.rates.framework.optimizer; }},
    {K::host_link_gbs, "host_link.gbs", T::number, "GB/s", kOpen, true, always, true, C::none,
     "the copy engine's host <-> device bandwidth, each way",
     [](F& m, D) -> KeySlot { return &m.rates.host_link_gbs; }},
    {K::host_same_memory, "host_link.same_memory", T::flag, "", 0, false, optional, false, C::none,
     "true on host builds: offload copies within one memory",
     [](F& m, D) -> KeySlot { return &m.rates.host_same_memory; }},
    {K::link_gbs, "links.<scope>.<op>.gbs", T::number, "GB/s", kOpen, true, in_group, true, C::link_rate,
     "a collective's bandwidth: bytes as the communication model counts them per second",
     [](F& m, D d) -> KeySlot { return &m.rates.links[at<LinkScope>(d, 0)][at<LinkOp>(d, 1)].gbs; }},
    {K::link_latency_us, "links.<scope>.<op>.latency_us", T::number, "us", 0, false, in_group, true, C::none,
     "a collective's latency",
     [](F& m, D d) -> KeySlot { return &m.rates.links[at<LinkScope>(d, 0)][at<LinkOp>(d, 1)].latency_us; }},
    {K::link_sync_us, "links.<scope>.<op>.sync_us", T::number, "us", 0, false, optional, true, C::none,
     "the wait for the other ranks when the call follows compute (0 where absent)",
     [](F& m, D d) -> KeySlot { return &m.rates.links[at<LinkScope>(d, 0)][at<LinkOp>(d, 1)].sync_us; }},
    {K::nominal_gemm_gflops, "nominal.gemm_gflops.<precision>", T::number, "GFLOP/s", kOpen, true, optional, false,
     C::none, "the specification's dense peak: MFU's denominator in nominal files, the plausibility reference",
     [](F& m, D d) -> KeySlot { return &m.nominal_gemm[at<Precision>(d, 0)]; }},
    {K::nominal_link_floor_gbs, "nominal.link_floor_gbs", T::number, "GB/s", kOpen, true, optional, false, C::none,
     "a link slower than this is implausible (default 0.1 GB/s)",
     [](F& m, D) -> KeySlot { return &m.link_floor_gbs; }},
    {K::provenance, "provenance", T::text_map, "", 0, false, optional, false, C::none,
     "key: where the figures under that key come from",
     [](F& m, D) -> KeySlot { return &m.provenance; }},
    {K::implausible, "implausible", T::texts, "", 0, false, optional, false, C::none,
     "figures below their floors, kept on purpose (probe --allow-implausible)",
     [](F& m, D) -> KeySlot { return &m.implausible; }},
  };
// clang-format on
}  // namespace

const std::vector<MachineKeyRow>& machine_key_table() { return kRows; }

const MachineKeyRow& machine_key(MachineKey id) {
  for (const auto& row : machine_key_table())
    if (row.id == id) return row;
  throw std::logic_error("machine_key: a key without a row");
}

const std::vector<std::string>& placeholder_names(const std::string& part) {
  static const std::map<std::string, std::vector<std::string>> names = {
      {"<precision>", names_of<Precision>()}, {"<gemm_class>", names_of<GemmClass>()},
      {"<pass>", names_of<AttentionPass>()},  {"<family>", names_of<PhaseFamily>()},
      {"<scope>", names_of<LinkScope>()},     {"<op>", names_of<LinkOp>()}};
  static const std::vector<std::string> none;
  const auto it = names.find(part);
  return it == names.end() ? none : it->second;
}

namespace {
std::vector<std::string> parts_of(const std::string& dotted) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t dot; (dot = dotted.find('.', start)) != std::string::npos; start = dot + 1)
    parts.push_back(dotted.substr(start, dot - start));
  parts.push_back(dotted.substr(start));
  return parts;
}
}  // namespace

std::string machine_key_text(MachineKey id, const KeyDims& dims) {
  std::string out;
  int d = 0;
  for (const auto& part : parts_of(machine_key(id).pattern)) {
    const auto& names = placeholder_names(part);
    out += (out.empty() ? "" : ".") + (names.empty() ? part : names.at(std::size_t(dims[std::size_t(d++)])));
  }
  return out;
}

std::string machine_key_prefix(MachineKey id, const KeyDims& dims, int parts) {
  std::string text = machine_key_text(id, dims);
  for (std::size_t i = 0, seen = 0; i < text.size(); ++i)
    if (text[i] == '.' && int(++seen) == parts) return text.substr(0, i);
  return text;
}

std::vector<std::pair<std::string, KeyDims>> expansions(const MachineKeyRow& row) {
  std::vector<std::pair<std::string, KeyDims>> out{{"", KeyDims{0, 0, 0}}};
  int d = 0;
  for (const auto& part : parts_of(row.pattern)) {
    const auto& names = placeholder_names(part);
    std::vector<std::pair<std::string, KeyDims>> next;
    for (const auto& [text, dims] : out) {
      const std::string sep = text.empty() ? "" : ".";
      if (names.empty()) {
        next.push_back({text + sep + part, dims});
        continue;
      }
      for (std::size_t i = 0; i < names.size(); ++i) {
        KeyDims nd = dims;
        nd[std::size_t(d)] = int(i);
        next.push_back({text + sep + names[i], nd});
      }
    }
    if (!names.empty()) ++d;
    out = std::move(next);
  }
  return out;
}

std::string machine_keys_text() {
  static const char* type_names[] = {"text", "number", "whole number", "true|false", "list of texts", "key: text"};
  std::string out = "machine-file keys (docs/time_model.md); <...> stands for each name listed under it:\n";
  char line[512];
  for (const auto& row : machine_key_table()) {
    const std::string need = row.need & always ? "required" : row.need & some ? "at least one" :
                             row.need & in_group ? "with its group" : "optional";
    std::string floor;
    if (row.type == KeyType::number || row.type == KeyType::whole)
      floor = std::string(row.floor_open ? "> " : ">= ") + std::to_string(row.floor).substr(0, 4);
    std::snprintf(line, sizeof line, "  %-38s %-13s %-8s %-6s %-15s %s%s\n", row.pattern,
                  type_names[int(row.type)], row.unit, floor.c_str(), need.c_str(), row.help,
                  row.figure ? " (a figure: needs a provenance)" : "");
    out += line;
  }
  for (const char* p : {"<precision>", "<gemm_class>", "<pass>", "<family>", "<scope>", "<op>"}) {
    out += std::string("  ") + p + ":";
    for (const auto& n : placeholder_names(p)) out += " " + n;
    out += "\n";
  }
  return out;
}

// MachineRates' accessors (machine_rates.hpp), here because a missing rate is named by its key.
namespace {
double positive_rate(double v, const std::string& key) {
  if (!(v > 0)) throw std::runtime_error("machine file: " + key + " is missing or not positive");
  return v;
}
}  // namespace

double MachineRates::gemm(Precision p, GemmClass c) const {
  return positive_rate(gemm_gflops[p][c], machine_key_text(MachineKey::gemm_gflops, {int(p), int(c), 0}));
}

double MachineRates::attention(Precision p, AttentionPass pass) const {
  return positive_rate(attention_gflops[p][pass], machine_key_text(MachineKey::attention_gflops, {int(p), int(pass), 0}));
}

double MachineRates::mfu_peak(Precision p) const {
  return mfu_peak_gflops[p] > 0 ? mfu_peak_gflops[p] : gemm(p, GemmClass::square);
}

double MachineRates::scale(Precision p, PhaseFamily f) const { return step_scale[p][f] > 0 ? step_scale[p][f] : 1.0; }

MachineRates MachineRates::at_busy_ranks(int busy) const {
  MachineRates r = *this;
  if (ranks_per_node < 2 || busy >= ranks_per_node) return r;
  const double w = double(std::max(busy, 1) - 1) / double(ranks_per_node - 1);  // 0: alone, 1: all at work
  for (const Precision p : all_of<Precision>())
    for (const PhaseFamily f : all_of<PhaseFamily>())
      if (step_scale[p][f] > 0 && step_scale_alone[p][f] > 0)
        r.step_scale[p][f] = step_scale_alone[p][f] + w * (step_scale[p][f] - step_scale_alone[p][f]);
  return r;
}

double MachineRates::attention_padding(Precision p, AttentionPass pass, int heads_per_kv, int head_dim) const {
  if (attention_heads_per_kv < 1 || attention_head_dim < 1) return 1.0;
  const bool portable = attention_kernel[p] == "portable";
  const int h1 = attention_head_dim, h2 = attention_second_head_dim;
  const double R1 = attention_gflops[p][pass], R2 = attention_second_gflops[p][pass];
  const double grouping = portable ? kernels::AttnTiles(h1, heads_per_kv).padding() /
                                         kernels::AttnTiles(h1, attention_heads_per_kv).padding()
                                   : 1.0;
  if (h2 > 0 && h2 != h1 && R1 > 0 && R2 > 0) {
    // seconds per causal pair and q head, per useful FLOP of a head dim: t_i = h_i / R_i (the
    // FLOPs per pair are a constant times h); t(h) = c0 + c1 h, c0 >= 0
    const double t1 = h1 / R1, t2 = h2 / R2;
    double c1 = (t2 - t1) / double(h2 - h1), c0 = t1 - c1 * h1;
    if (c0 < 0) c0 = 0, c1 = t1 / h1;
    return grouping * ((c0 + c1 * head_dim) / head_dim) / (t1 / h1);
  }
  if (!portable) return 1.0;
  return kernels::AttnTiles(head_dim, heads_per_kv).padding() / kernels::AttnTiles(h1, attention_heads_per_kv).padding();
}

LinkRate MachineRates::link(LinkOp op, int ranks, int stride) const {
  const long span = long(ranks) * std::max(1, stride);
  const LinkScope scope = span <= ranks_per_node ? LinkScope::intra_node : LinkScope::inter_node;
  const LinkRate r = links[scope][op];
  const std::string key = machine_key_text(MachineKey::link_gbs, {int(scope), int(op), 0});
  if (!(r.gbs > 0))
    throw std::runtime_error("machine file: " + key.substr(0, key.rfind('.')) + " is missing (needed for a collective of " +
                             std::to_string(ranks) + " ranks; probe with that many ranks or write it by hand)");
  return r;
}

}  // namespace minilst
