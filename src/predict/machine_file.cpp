#include "predict/machine_file.hpp"

#include "io/input_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <type_traits>
#include <variant>
#include <set>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

#include "core/number_text.hpp"
#include "predict/device_facts.hpp"

namespace minilst {

namespace {
constexpr std::uintmax_t kMaxMachineFileBytes = 1 << 20;  // a machine file is a few KiB
// A figure above this is a typo in every unit the file uses (GFLOP/s, GB/s, us): 10^9 GFLOP/s is
// an exaFLOP/s per rank.
constexpr double kLargestFigure = 1e9;
}  // namespace

namespace {
std::vector<std::string> split_dots(const std::string& dotted) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t dot; (dot = dotted.find('.', start)) != std::string::npos; start = dot + 1)
    parts.push_back(dotted.substr(start, dot - start));
  parts.push_back(dotted.substr(start));
  return parts;
}

// Whether the first key.size() parts of the row's pattern match `key` (dims filled for its placeholders).
bool matches(const MachineKeyRow& row, const std::vector<std::string>& key, KeyDims& dims) {
  const auto pattern = split_dots(row.pattern);
  if (key.size() > pattern.size()) return false;
  int d = 0;
  for (std::size_t i = 0; i < key.size(); ++i) {
    const auto& names = placeholder_names(pattern[i]);
    if (names.empty()) {
      if (pattern[i] != key[i]) return false;
      continue;
    }
    const auto it = std::find(names.begin(), names.end(), key[i]);
    if (it == names.end()) return false;
    dims[std::size_t(d++)] = int(it - names.begin());
  }
  return true;
}

std::string fmt(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

// A YAML scalar: plain where it is a simple word, else double-quoted with escapes.
std::string yaml_text(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") ==
                                       std::string::npos && s != "true" && s != "false" && s != "null" &&
                     !std::isdigit(static_cast<unsigned char>(s[0])) && s[0] != '-' && s[0] != '.';
  if (plain) return s;
  std::string out = "\"";
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') out += '\\', out += ch;
    else if (ch == '\n') out += "\\n";
    else if (u < 0x20 || u == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", u);
      out += esc;
    } else out += ch;
  }
  return out + "\"";
}

struct Reader {
  std::string path;
  MachineFile m;
  std::set<std::string> given;  // the keys the file gives

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw std::runtime_error("machine file " + path + ": " + key + ": " + why);
  }

  // The names a key part may take after `prefix` (for "unknown key" messages).
  std::string expected_after(const std::vector<std::string>& prefix) const {
    std::vector<std::string> names;
    for (const auto& row : machine_key_table()) {
      KeyDims dims{};
      const auto pattern = split_dots(row.pattern);
      if (pattern.size() <= prefix.size() || !matches(row, prefix, dims)) continue;
      const auto& ph = placeholder_names(pattern[prefix.size()]);
      for (const auto& n : ph.empty() ? std::vector<std::string>{pattern[prefix.size()]} : ph)
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return list;
  }

  void number(const MachineKeyRow& row, const std::string& key, const YAML::Node& v, KeySlot slot) {
    if (!v.IsScalar()) fail(key, std::string("expected a ") + (row.type == KeyType::whole ? "whole number" : "number"));
    const std::string text = v.Scalar();
    double x = 0;
    long long i = 0;
    const bool ok = row.type == KeyType::whole ? parse_integer(text, i) : parse_decimal(text, x);
    if (!ok) fail(key, std::string("expected a ") + (row.type == KeyType::whole ? "whole number" : "number") + ", got '" + text + "'");
    if (row.type == KeyType::whole) x = double(i);
    if (x < row.floor || (row.floor_open && x == row.floor))
      fail(key, std::string("must be ") + (row.floor_open ? "> " : ">= ") + fmt(row.floor));
    if (row.type == KeyType::whole) {
      const bool head_dim = row.id == MachineKey::attention_head_dim || row.id == MachineKey::attention_second_head_dim;
      if (head_dim && (x > 256 || i % 2 != 0)) fail(key, "a head dim is even, in [2, 256] (as a deck's), got " + text);
      if ((row.id == MachineKey::ranks_per_node || row.id == MachineKey::attention_heads_per_kv) && x > (1 << 20))
        fail(key, "must be at most 2^20, got " + text);
      if (x > 1e9) fail(key, "must be at most 1e9");
      *std::get<int*>(slot) = int(i);
    } else {
      if (x != 0 && !std::isnormal(x)) fail(key, "not a normal number (subnormal: " + text + ")");
      if (x > kLargestFigure) fail(key, fmt(x) + " is beyond any machine (at most " + fmt(kLargestFigure) + ")");
      *std::get<double*>(slot) = x;
    }
  }

  void leaf(const MachineKeyRow& row, const KeyDims& dims, const std::string& key, const YAML::Node& v) {
    if (!given.insert(key).second) fail(key, "given twice");
    const KeySlot slot = row.slot(m, dims);
    switch (row.type) {
      case KeyType::number:
      case KeyType::whole: number(row, key, v, slot); break;
      case KeyType::text:
        if (!v.IsScalar()) fail(key, "expected a string");
        *std::get<std::string*>(slot) = v.Scalar();
        break;
      case KeyType::flag:
        if (!v.IsScalar() || (v.Scalar() != "true" && v.Scalar() != "false")) fail(key, "expected true or false");
        *std::get<bool*>(slot) = v.Scalar() == "true";
        break;
      case KeyType::texts:
        if (!v.IsSequence()) fail(key, "expected a list");
        for (const auto& t : v) {
          if (!t.IsScalar()) fail(key, "expected a list of strings");
          std::get<std::vector<std::string>*>(slot)->push_back(t.Scalar());
        }
        break;
      case KeyType::text_map:
        if (!v.IsMap()) fail(key, "expected a mapping of key: source");
        for (const auto& kv : v) {
          const std::string k = kv.first.Scalar();
          if (!kv.second.IsScalar()) fail(key + "." + k, "expected a string");
          if (!std::get<std::map<std::string, std::string>*>(slot)->emplace(k, kv.second.Scalar()).second)
            fail(key + "." + k, "given twice");
        }
        break;
    }
  }

  // A mapping at `prefix` (the root: empty): each child a key of the table, or a part of one.
  void walk(const YAML::Node& node, const std::vector<std::string>& prefix) {
    const std::string where = prefix.empty() ? "" : [&] {
      std::string s;
      for (const auto& p : prefix) s += (s.empty() ? "" : ".") + p;
      return s;
    }();
    if (!node.IsMap()) fail(where, "expected a mapping");
    for (const auto& kv : node) {
      std::vector<std::string> key = prefix;
      key.push_back(kv.first.Scalar());
      const std::string text = where.empty() ? key.back() : where + "." + key.back();
      const MachineKeyRow* full = nullptr;
      bool partial = false;
      KeyDims dims{};
      for (const auto& row : machine_key_table()) {
        KeyDims d{};
        if (!matches(row, key, d)) continue;
        if (split_dots(row.pattern).size() == key.size()) full = &row, dims = d;
        else partial = true;
      }
      if (full) leaf(*full, dims, text, kv.second);
      else if (partial) walk(kv.second, key);
      else fail(text, "unknown key (expected one of: " + expected_after(prefix) + ")");
    }
  }
};

// Whether some given key lies under `group` (group.<part>...).
bool under(const std::set<std::string>& given, const std::string& group) {
  const auto it = given.lower_bound(group + ".");
  return it != given.end() && it->rfind(group + ".", 0) == 0;
}

// Every key the table requires, given: "" or "key: missing: ..." for the first that is not.
std::string missing_keys(const std::set<std::string>& given) {
  for (const auto& row : machine_key_table()) {
    bool some_given = false;
    for (const auto& [key, dims] : expansions(row)) {
      some_given |= given.count(key) > 0;
      const auto dot = key.rfind('.');
      const bool needed = (row.need & always) || ((row.need & in_group) && dot != std::string::npos && under(given, key.substr(0, dot)));
      if (needed && !given.count(key)) {
        const char* type = row.type == KeyType::text ? "a string" : row.type == KeyType::whole ? "a whole number" : "a number";
        return key + ": missing: expected " + type + (*row.unit ? std::string(" (") + row.unit + ")" : "");
      }
    }
    if ((row.need & some) && !some_given) return std::string(row.pattern) + ": missing: give at least one";
  }
  return "";
}

// The keys whose values are set (what the writer writes), as the reader would have given them.
std::set<std::string> set_keys(MachineFile& m) {
  std::set<std::string> set;
  for (const auto& row : machine_key_table())
    for (const auto& [key, dims] : expansions(row)) {
      const KeySlot slot = row.slot(m, dims);
      const bool is_set = std::visit(
          [](auto* p) {
            using P = std::remove_pointer_t<decltype(p)>;
            if constexpr (std::is_same_v<P, double>) return *p > 0;
            else if constexpr (std::is_same_v<P, int>) return *p > 0;
            else if constexpr (std::is_same_v<P, bool>) return true;
            else return !p->empty();
          },
          slot);
      if (is_set || (row.need & always)) set.insert(key);
    }
  // in-group numbers that may be 0 (a latency): written with their group
  for (const auto& row : machine_key_table())
    if ((row.need & in_group) && (row.type == KeyType::number || row.type == KeyType::flag))
      for (const auto& [key, dims] : expansions(row)) {
        const std::string group = key.substr(0, key.rfind('.'));
        for (const auto& k : std::set<std::string>(set))
          if (k != key && k.rfind(group + ".", 0) == 0) set.insert(key);
      }
  // the host link's flag goes with its bandwidth
  if (set.count(machine_key_text(MachineKey::host_link_gbs))) set.insert(machine_key_text(MachineKey::host_same_memory));
  return set;
}

// Every figure the file gives has a provenance: its own key's or a prefix's.
void check_provenance(const Reader& r) {
  const auto covered = [&](const std::string& key) {
    for (std::string k = key;; k = k.substr(0, k.rfind('.'))) {
      if (r.m.provenance.count(k)) return true;
      if (k.find('.') == std::string::npos) return false;
    }
  };
  for (const auto& row : machine_key_table())
    if (row.figure)
      for (const auto& [key, dims] : expansions(row))
        if (r.given.count(key) && !covered(key)) {
          // links: the figure is the operation (its gbs, latency_us, sync_us together)
          const std::string figure = row.id == MachineKey::link_gbs || row.id == MachineKey::link_latency_us ||
                                             row.id == MachineKey::link_sync_us
                                         ? key.substr(0, key.rfind('.'))
                                         : key;
          r.fail("provenance", "no provenance for " + figure + " (give provenance." + figure + " or of a key above it)");
        }
}

// A nominal file naming its device: each nominal peak within 1% of one of the device's datasheet peaks.
void check_device(const Reader& r) {
  if (r.m.device.empty()) return;
  const DeviceFacts* d = find_device(r.m.device);
  const std::string key = machine_key_text(MachineKey::device);
  if (!d) r.fail(key, "unknown device '" + r.m.device + "' (minilst plan --device list)");
  for (const Precision p : all_of<Precision>()) {
    const double v = r.m.nominal_gemm[p];
    if (v <= 0) continue;
    const std::vector<PeakFormat> formats = p == Precision::float32 ? std::vector<PeakFormat>{PeakFormat::fp32, PeakFormat::tf32}
                                                                    : std::vector<PeakFormat>{peak_format(p)};
    bool agrees = false;
    std::string listed;
    for (const PeakFormat f : formats) {
      agrees |= d->peak(f) > 0 && std::abs(v / d->peak(f) - 1) <= 0.01;
      listed += (listed.empty() ? "" : " or ") + fmt(d->peak(f)) + " (" + name_of(f) + ")";
    }
    if (!agrees)
      r.fail(machine_key_text(MachineKey::nominal_gemm_gflops, {int(p), 0, 0}),
             fmt(v) + " GFLOP/s is not the " + d->name + " datasheet's " + listed + " GFLOP/s (predict/device_facts.cpp)");
  }
}
}  // namespace

std::string missing_machine_keys(MachineFile& m) { return missing_keys(set_keys(m)); }

namespace {
// Sets "a.b.c=value" in the file's tree (mappings made where absent).
void apply_override(YAML::Node root, const std::string& path, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw std::runtime_error("machine file " + path + ": override '" + assignment + "': expected key=value");
  const auto parts = split_dots(assignment.substr(0, eq));
  std::vector<YAML::Node> chain{root};
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (next.IsDefined() && !next.IsMap())
      throw std::runtime_error("machine file " + path + ": override '" + assignment + "': " + parts[i] + " is not a section");
    chain.push_back(next);
  }
  chain.back()[parts.back()] = assignment.substr(eq + 1);
}
}  // namespace

MachineFile load_machine_file(const std::string& path, const std::vector<std::string>& overrides) {
  Reader r{path, {}, {}};
  std::string text, why;
  if (!try_read_input_file(path, kMaxMachineFileBytes, text, why))  // io/input_file.hpp: never blocks
    throw std::runtime_error("machine file " + path + ": cannot be read: " + why);
  if (const auto deep = yaml_nesting_problem(text); !deep.empty())
    throw std::runtime_error("machine file " + path + ": not a machine file: " + deep);
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error("machine file " + path + ": not YAML: " + e.what());
  }
  if (docs.size() > 1)
    throw std::runtime_error("machine file " + path + ": holds " + std::to_string(docs.size()) + " YAML documents; a machine file is one");
  YAML::Node root = docs.empty() ? YAML::Node() : docs[0];
  if (!root.IsMap()) throw std::runtime_error("machine file " + path + ": expected a YAML mapping");
  for (const auto& o : overrides) apply_override(root, path, o);
  r.m.schema.clear();
  r.m.schema_version = 0;
  r.walk(root, {});
  // the header first (a file of another kind is named as such), then what is missing
  if (r.given.count("schema") && r.m.schema != kMachineSchema) r.fail("schema", std::string("expected ") + kMachineSchema);
  if (r.given.count("schema_version") && r.m.schema_version != kMachineSchemaVersion)
    r.fail("schema_version", "expected " + std::to_string(kMachineSchemaVersion));
  if (const auto missing = missing_keys(r.given); !missing.empty()) r.fail(missing.substr(0, missing.find(':')), missing.substr(missing.find(':') + 2));
  if (r.m.kind != "measured" && r.m.kind != "nominal") r.fail("kind", "expected measured or nominal");
  if (r.m.kind == "nominal") r.m.rates.mfu_peak_gflops = r.m.nominal_gemm;  // MFU against the specification's peak
  check_provenance(r);
  check_device(r);
  // A figure below its floor (a GEMM under 1% of nominal.gemm_gflops, a link under the floor)
  // is refused unless the file flags it under `implausible:` (probe --allow-implausible).
  for (const auto& bad : implausible_figures(r.m, {}, kDefaultLinkFloorGBs)) {
    const std::string key = bad.substr(0, bad.find(':'));
    bool flagged = false;
    for (const auto& f : r.m.implausible) flagged |= f.rfind(key + ":", 0) == 0;
    if (!flagged)
      r.fail(key, "implausible: " + bad.substr(key.size() + 2) +
                      " (list it under `implausible:` to use it anyway, as probe --allow-implausible does)");
  }
  return r.m;
}

namespace {
// A key's value as YAML text.
std::string value_text(const KeySlot& slot) {
  return std::visit(
      [](auto* p) -> std::string {
        using P = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<P, double>) return fmt(*p);
        else if constexpr (std::is_same_v<P, int>) return std::to_string(*p);
        else if constexpr (std::is_same_v<P, bool>) return *p ? "true" : "false";
        else if constexpr (std::is_same_v<P, std::string>) return yaml_text(*p);
        else return "";
      },
      slot);
}

// The set keys as a tree, in the table's order.
struct KeyTree {
  std::string name, value;
  std::vector<KeyTree> children;
  KeyTree* child(const std::string& n) {
    for (auto& c : children)
      if (c.name == n) return &c;
      children.push_back({n, "", {}});
    return &children.back();
  }
  bool leaves_only() const {
    return !children.empty() && std::all_of(children.begin(), children.end(), [](const KeyTree& c) { return c.children.empty(); });
  }
  // A leaf as `name: value`; a mapping of leaves below the top as one flow line `name: {a: 1, b: 2}`;
  // a top-level key with its first row's help as a comment.
  void emit(std::ostringstream& out, int depth, const std::map<std::string, std::string>& help) const {
    const std::string indent(std::size_t(2 * depth), ' ');
    const auto h = help.find(name);
    const std::string comment = depth == 0 && h != help.end() ? "    # " + h->second : "";
    if (children.empty()) {
      out << indent << name << ": " << value << comment << "\n";
    } else if (leaves_only() && depth > 0) {
      out << indent << name << ": {";
      for (std::size_t i = 0; i < children.size(); ++i) out << (i ? ", " : "") << children[i].name << ": " << children[i].value;
      out << "}\n";
    } else {
      out << indent << name << ":" << comment << "\n";
      for (const auto& c : children) c.emit(out, depth + 1, help);
    }
  }
};
}  // namespace

std::string machine_yaml(const MachineFile& file) {
  MachineFile m = file;  // the slots are read through a mutable file
  const std::set<std::string> set = set_keys(m);
  KeyTree root;
  std::map<std::string, std::string> help;  // top-level key -> its first row's help
  for (const auto& row : machine_key_table()) {
    if (row.type == KeyType::text_map || row.type == KeyType::texts) continue;
    for (const auto& [key, dims] : expansions(row)) {
      if (!set.count(key)) continue;
      KeyTree* n = &root;
      for (const auto& part : split_dots(key)) n = n->child(part);
      n->value = value_text(row.slot(m, dims));
      const std::string top = split_dots(key).front();
      if (top != "schema" && top != "schema_version") help.emplace(top, row.help);
    }
  }
  std::ostringstream out;
  out << "# A minilst machine file (docs/time_model.md): rates per rank, each with its provenance.\n";
  for (const auto& c : root.children) c.emit(out, 0, help);
  for (const auto& row : machine_key_table()) {
    if (row.type != KeyType::text_map && row.type != KeyType::texts) continue;
    const std::string key = row.pattern;
    if (!set.count(key)) continue;
    const KeySlot slot = row.slot(m, {0, 0, 0});
    out << key << ":    # " << row.help << "\n";
    if (row.type == KeyType::text_map)
      for (const auto& [k, v] : *std::get<std::map<std::string, std::string>*>(slot)) out << "  " << k << ": " << yaml_text(v) << "\n";
    else
      for (const auto& s : *std::get<std::vector<std::string>*>(slot)) out << "  - " << yaml_text(s) << "\n";
  }
  return out.str();
}

void write_machine_file(const std::string& path, const MachineFile& m) {
  const std::string tmp = path + ".partial-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << machine_yaml(m);
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw std::runtime_error("cannot write " + tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path);
  }
}

double isa_nominal_gflops(Precision precision, std::string& isa) {
#ifdef KOKKOS_ENABLE_CUDA
  isa = "a GPU (a 10 TFLOP/s floor per device)";
  (void)precision;
  return 10000;
#else
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
#else
  const bool avx512 = false, avx2 = false;
#endif
  const double fp32 = avx512 ? 64 : avx2 ? 32 : 8;
  isa = avx512 ? "avx512" : avx2 ? "avx2" : "generic";
  if (precision == Precision::float64) return fp32 / 2;
  if (precision == Precision::bf16) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx512 && __builtin_cpu_supports("avx512bf16")) return 2 * fp32;
#endif
    return fp32;
  }
  return fp32;
#endif
}

std::vector<std::string> implausible_figures(const MachineFile& file, const EnumMap<Precision, double>& nominal_default,
                                             double link_floor_gbs) {
  MachineFile m = file;
  std::vector<std::string> bad;
  const double floor = m.link_floor_gbs > 0 ? m.link_floor_gbs : link_floor_gbs;
  for (const auto& row : machine_key_table()) {
    if (row.check == KeyCheck::none) continue;
    for (const auto& [key, dims] : expansions(row)) {
      const double v = *std::get<double*>(row.slot(m, dims));
      if (v == 0) continue;  // absent (a negative figure is not: a step_scale measured below 0 is named below)
      switch (row.check) {
        case KeyCheck::gemm_rate: {
          const Precision p = Precision(dims[0]);
          const bool own = m.nominal_gemm[p] > 0;
          const double nominal = own ? m.nominal_gemm[p] : nominal_default[p];
          if (nominal > 0 && v < 0.01 * nominal)
            bad.push_back(key + ": " + fmt(v) + " GFLOP/s is below 1% of the nominal " + fmt(nominal) + " GFLOP/s (" +
                          (own ? "nominal.gemm_gflops" : "the ISA floor") + ")");
          // above the peak: a nominal file's is the datasheet's; a measured file's the ISA floor (accelerators such
          // as AMX go beyond it, not a hundredfold)
          const double over = m.kind == "nominal" ? 1.0 : 100.0;
          if (own && v > over * nominal)
            bad.push_back(key + ": " + fmt(v) + " GFLOP/s is above " + (over > 1 ? "100x " : "") +
                          "the file's own nominal.gemm_gflops (" + fmt(nominal) + " GFLOP/s)");
          break;
        }
        case KeyCheck::link_rate:
          if (v < floor)
            bad.push_back(key.substr(0, key.rfind('.')) + ": " + fmt(v) + " GB/s is below the link floor " + fmt(floor) + " GB/s");
          break;
        case KeyCheck::step_scale:
          if (v < kStepScaleRange[0] || v > kStepScaleRange[1])
            bad.push_back(key + ": " + fmt(v) + " is outside [" + fmt(kStepScaleRange[0]) + ", " + fmt(kStepScaleRange[1]) +
                          "] (a step far from the rates measured alone: a machine busy with other work?)");
          break;
        case KeyCheck::none: break;
      }
    }
  }
  return bad;
}

}  // namespace minilst
