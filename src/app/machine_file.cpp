#include "app/machine_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

namespace minilst {

namespace {
const std::vector<std::string> kPrecisions = {"float", "bf16", "double"};
const std::vector<std::string> kGemmClasses = {"square", "projection", "mlp", "lm_head"};
const std::vector<std::string> kDirections = {"forward", "backward"};
const std::vector<std::string> kScopes = {"intra_node", "inter_node"};
const std::vector<std::string> kLinkOps = {"p2p", "alltoall", "allreduce", "allgather", "reduce_scatter"};
const std::vector<std::string> kScaleFamilies = {"attention", "mlp", "lm_head", "other", "optimizer"};

struct Reader {
  std::string path;
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw std::runtime_error("machine file " + path + ": " + key + ": " + why);
  }
  // A number > 0 (>= 0 where zero_ok), finite.
  double number(const YAML::Node& n, const std::string& key, bool zero_ok = false) const {
    if (!n || !n.IsScalar()) fail(key, "expected a number");
    double v = 0;
    try {
      v = n.as<double>();
    } catch (const YAML::Exception&) {
      fail(key, "expected a number, got '" + n.Scalar() + "'");
    }
    if (!std::isfinite(v) || v < 0 || (v == 0 && !zero_ok)) fail(key, zero_ok ? "must be >= 0" : "must be > 0");
    return v;
  }
  std::string text(const YAML::Node& n, const std::string& key) const {
    if (!n || !n.IsScalar()) fail(key, "expected a string");
    return n.Scalar();
  }
  // A mapping whose keys are among `allowed`.
  void keys(const YAML::Node& n, const std::string& key, const std::vector<std::string>& allowed) const {
    if (!n.IsMap()) fail(key, "expected a mapping");
    for (const auto& kv : n) {
      const std::string k = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        fail(key.empty() ? k : key + "." + k, "unknown key (expected one of: " + list + ")");
      }
    }
  }
};

std::string fmt(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

// A YAML flow mapping of the keys of `order` that `values` holds, in that order: "{a: 1, b: 2}".
std::string flow_map(const std::map<std::string, double>& values, const std::vector<std::string>& order) {
  std::string out = "{";
  for (const auto& k : order)
    if (const auto it = values.find(k); it != values.end()) out += (out.size() > 1 ? ", " : "") + k + ": " + fmt(it->second);
  return out + "}";
}

// YAML double-quoted scalar.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out + "\"";
}
}  // namespace

MachineFile load_machine_file(const std::string& path) {
  Reader r{path};
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw std::runtime_error("machine file " + path + ": cannot be read");
  } catch (const YAML::Exception& e) {
    throw std::runtime_error("machine file " + path + ": not YAML: " + e.what());
  }
  if (!root.IsMap()) throw std::runtime_error("machine file " + path + ": expected a YAML mapping");
  r.keys(root, "", {"schema", "schema_version", "name", "kind", "description", "source", "ranks_per_node",
                    "gemm_gflops", "attention_gflops", "attention_probe", "step_scale", "elementwise_gbs", "optimizer_gbs", "op_overhead_us", "host_link", "links",
                    "nominal", "provenance", "implausible"});
  if (r.text(root["schema"], "schema") != kMachineSchema) r.fail("schema", std::string("expected ") + kMachineSchema);
  if (r.number(root["schema_version"], "schema_version") != kMachineSchemaVersion)
    r.fail("schema_version", "expected " + std::to_string(kMachineSchemaVersion));
  MachineFile m;
  m.rates.name = r.text(root["name"], "name");
  m.kind = r.text(root["kind"], "kind");
  if (m.kind != "measured" && m.kind != "nominal") r.fail("kind", "expected measured or nominal");
  if (root["description"]) m.description = r.text(root["description"], "description");
  m.source = r.text(root["source"], "source");
  const double rpn = r.number(root["ranks_per_node"], "ranks_per_node");
  if (rpn != std::floor(rpn)) r.fail("ranks_per_node", "expected a whole number");
  m.rates.ranks_per_node = int(rpn);

  const YAML::Node gemm = root["gemm_gflops"];
  if (!gemm) r.fail("gemm_gflops", "missing");
  r.keys(gemm, "gemm_gflops", kPrecisions);
  for (const auto& kv : gemm) {
    const std::string prec = kv.first.Scalar(), key = "gemm_gflops." + prec;
    r.keys(kv.second, key, kGemmClasses);
    for (const auto& cls : kGemmClasses) m.rates.gemm_gflops[prec][cls] = r.number(kv.second[cls], key + "." + cls);
  }
  const YAML::Node attn = root["attention_gflops"];
  if (!attn) r.fail("attention_gflops", "missing");
  r.keys(attn, "attention_gflops", kPrecisions);
  for (const auto& kv : attn) {
    const std::string prec = kv.first.Scalar(), key = "attention_gflops." + prec;
    r.keys(kv.second, key, kDirections);
    for (const auto& dir : kDirections) m.rates.attention_gflops[prec][dir] = r.number(kv.second[dir], key + "." + dir);
  }
  if (const YAML::Node probe = root["attention_probe"]) {
    r.keys(probe, "attention_probe", {"heads_per_kv", "head_dim", "kernel"});
    const auto whole = [&](const char* key) {
      const double v = r.number(probe[key], std::string("attention_probe.") + key);
      if (v != std::floor(v)) r.fail(std::string("attention_probe.") + key, "expected a whole number");
      return int(v);
    };
    m.rates.attention_heads_per_kv = whole("heads_per_kv");
    m.rates.attention_head_dim = whole("head_dim");
    if (const YAML::Node kernel = probe["kernel"]) {
      r.keys(kernel, "attention_probe.kernel", kPrecisions);
      for (const auto& kv : kernel)
        m.rates.attention_kernel[kv.first.Scalar()] = r.text(kv.second, "attention_probe.kernel." + kv.first.Scalar());
    }
  }
  if (const YAML::Node scale = root["step_scale"]) {
    r.keys(scale, "step_scale", kPrecisions);
    for (const auto& kv : scale) {
      const std::string prec = kv.first.Scalar(), key = "step_scale." + prec;
      r.keys(kv.second, key, kScaleFamilies);
      for (const auto& f : kv.second) m.rates.step_scale[prec][f.first.Scalar()] = r.number(f.second, key + "." + f.first.Scalar());
    }
  }
  m.rates.elementwise_gbs = r.number(root["elementwise_gbs"], "elementwise_gbs");
  m.rates.op_overhead_us = r.number(root["op_overhead_us"], "op_overhead_us", true);
  if (root["optimizer_gbs"]) m.rates.optimizer_gbs = r.number(root["optimizer_gbs"], "optimizer_gbs");
  const YAML::Node host = root["host_link"];
  if (!host) r.fail("host_link", "missing");
  r.keys(host, "host_link", {"gbs", "same_memory"});
  m.rates.host_link_gbs = r.number(host["gbs"], "host_link.gbs");
  if (host["same_memory"]) {
    try {
      m.rates.host_same_memory = host["same_memory"].as<bool>();
    } catch (const YAML::Exception&) {
      r.fail("host_link.same_memory", "expected true or false");
    }
  }
  if (const YAML::Node links = root["links"]) {
    r.keys(links, "links", kScopes);
    for (const auto& kv : links) {
      const std::string scope = kv.first.Scalar(), key = "links." + scope;
      r.keys(kv.second, key, kLinkOps);
      for (const auto& op : kv.second) {
        const std::string k = key + "." + op.first.Scalar();
        r.keys(op.second, k, {"gbs", "latency_us", "sync_us"});
        m.rates.links[scope][op.first.Scalar()] = {
            r.number(op.second["gbs"], k + ".gbs"), r.number(op.second["latency_us"], k + ".latency_us", true),
            op.second["sync_us"] ? r.number(op.second["sync_us"], k + ".sync_us", true) : 0.0};
      }
    }
  }
  if (const YAML::Node nominal = root["nominal"]) {
    r.keys(nominal, "nominal", {"gemm_gflops", "link_floor_gbs"});
    if (nominal["gemm_gflops"]) {
      r.keys(nominal["gemm_gflops"], "nominal.gemm_gflops", kPrecisions);
      for (const auto& kv : nominal["gemm_gflops"])
        m.nominal_gemm[kv.first.Scalar()] = r.number(kv.second, "nominal.gemm_gflops." + kv.first.Scalar());
    }
    if (nominal["link_floor_gbs"]) m.link_floor_gbs = r.number(nominal["link_floor_gbs"], "nominal.link_floor_gbs");
  }
  if (const YAML::Node prov = root["provenance"]) {
    if (!prov.IsMap()) r.fail("provenance", "expected a mapping of key: source");
    for (const auto& kv : prov) m.provenance[kv.first.Scalar()] = r.text(kv.second, "provenance." + kv.first.Scalar());
  }
  if (const YAML::Node bad = root["implausible"]) {
    if (!bad.IsSequence()) r.fail("implausible", "expected a list");
    for (const auto& b : bad) m.implausible.push_back(r.text(b, "implausible"));
  }
  if (m.kind == "nominal") m.rates.mfu_peak_gflops = m.nominal_gemm;  // MFU against the specification's peak
  // Every figure has a provenance: its own key's or a prefix's.
  const auto covered = [&](const std::string& key) {
    for (std::string k = key;; k = k.substr(0, k.rfind('.'))) {
      if (m.provenance.count(k)) return true;
      if (k.find('.') == std::string::npos) return false;
    }
  };
  std::vector<std::string> figures = {"elementwise_gbs", "op_overhead_us", "host_link.gbs"};
  if (m.rates.optimizer_gbs > 0) figures.push_back("optimizer_gbs");
  for (const auto& [prec, classes] : m.rates.gemm_gflops)
    for (const auto& [cls, v] : classes) figures.push_back("gemm_gflops." + prec + "." + cls);
  for (const auto& [prec, dirs] : m.rates.attention_gflops)
    for (const auto& [dir, v] : dirs) figures.push_back("attention_gflops." + prec + "." + dir);
  for (const auto& [scope, ops] : m.rates.links)
    for (const auto& [op, v] : ops) figures.push_back("links." + scope + "." + op);
  for (const auto& [prec, families] : m.rates.step_scale)
    for (const auto& [family, v] : families) figures.push_back("step_scale." + prec + "." + family);
  for (const auto& f : figures)
    if (!covered(f)) r.fail("provenance", "no provenance for " + f + " (give provenance." + f + " or of a key above it)");
  // A figure below its floor (a GEMM under 1% of nominal.gemm_gflops, a link under the floor)
  // is refused unless the file flags it under `implausible:` (probe --allow-implausible).
  for (const auto& bad : implausible_figures(m, {}, kDefaultLinkFloorGBs)) {
    const std::string key = bad.substr(0, bad.find(':'));
    bool flagged = false;
    for (const auto& f : m.implausible) flagged |= f.rfind(key + ":", 0) == 0;
    if (!flagged)
      r.fail(key, "implausible: " + bad.substr(key.size() + 2) +
                      " (list it under `implausible:` to use it anyway, as probe --allow-implausible does)");
  }
  return m;
}

std::string machine_yaml(const MachineFile& m) {
  std::ostringstream y;
  y << "# A minilst machine file (docs/time_model.md): rates per rank, each with its provenance.\n"
    << "schema: " << kMachineSchema << "\nschema_version: " << kMachineSchemaVersion << "\n"
    << "name: " << quoted(m.rates.name) << "\nkind: " << m.kind << "\n";
  if (!m.description.empty()) y << "description: " << quoted(m.description) << "\n";
  y << "source: " << quoted(m.source) << "\n"
    << "ranks_per_node: " << m.rates.ranks_per_node << "\n"
    << "gemm_gflops:             # dense GEMM, GFLOP/s per rank, by precision and shape class\n";
  for (const auto& [prec, classes] : m.rates.gemm_gflops) y << "  " << prec << ": " << flow_map(classes, kGemmClasses) << "\n";
  y << "attention_gflops:        # causal flash attention, useful GFLOP/s per rank (flops.hpp's count)\n";
  for (const auto& [prec, dirs] : m.rates.attention_gflops)
    y << "  " << prec << ": {forward: " << fmt(dirs.at("forward")) << ", backward: " << fmt(dirs.at("backward")) << "}\n";
  if (m.rates.attention_heads_per_kv > 0) {
    y << "attention_probe:         # the attention figures' problem (other head counts priced by the kernel's tiles)\n"
      << "  heads_per_kv: " << m.rates.attention_heads_per_kv << "\n  head_dim: " << m.rates.attention_head_dim << "\n";
    if (!m.rates.attention_kernel.empty()) {
      y << "  kernel: {";
      const char* sep = "";
      for (const auto& [prec, k] : m.rates.attention_kernel) y << sep << prec << ": " << k, sep = ", ";
      y << "}\n";
    }
  }
  if (!m.rates.step_scale.empty()) {
    y << "step_scale:              # a training step's phase time over the same phase priced from the rates above\n";
    for (const auto& [prec, families] : m.rates.step_scale) y << "  " << prec << ": " << flow_map(families, kScaleFamilies) << "\n";
  }
  y << "elementwise_gbs: " << fmt(m.rates.elementwise_gbs) << "    # a streaming kernel's bytes read + written per second\n"
    << (m.rates.optimizer_gbs > 0 ? "optimizer_gbs: " + fmt(m.rates.optimizer_gbs) + "      # AdamW's bytes over the model states per second\n" : std::string())
    << "op_overhead_us: " << fmt(m.rates.op_overhead_us) << "     # per kernel call\n"
    << "host_link: {gbs: " << fmt(m.rates.host_link_gbs) << ", same_memory: " << (m.rates.host_same_memory ? "true" : "false")
    << "}\n";
  if (!m.rates.links.empty()) {
    y << "links:                   # a call costs latency_us + sync_us (after compute) + bytes / gbs (bytes as comm_model counts them)\n";
    for (const auto& [scope, ops] : m.rates.links) {
      y << "  " << scope << ":\n";
      for (const auto& [op, l] : ops)
        y << "    " << op << ": {gbs: " << fmt(l.gbs) << ", latency_us: " << fmt(l.latency_us)
          << (l.sync_us > 0 ? ", sync_us: " + fmt(l.sync_us) : std::string()) << "}\n";
    }
  }
  if (!m.nominal_gemm.empty() || m.link_floor_gbs > 0) {
    y << "nominal:                 # the plausibility references\n";
    if (!m.nominal_gemm.empty()) {
      y << "  gemm_gflops: {";
      const char* sep = "";
      for (const auto& [prec, v] : m.nominal_gemm) y << sep << prec << ": " << fmt(v), sep = ", ";
      y << "}\n";
    }
    if (m.link_floor_gbs > 0) y << "  link_floor_gbs: " << fmt(m.link_floor_gbs) << "\n";
  }
  y << "provenance:\n";
  for (const auto& [k, v] : m.provenance) y << "  " << k << ": " << quoted(v) << "\n";
  if (!m.implausible.empty()) {
    y << "implausible:             # figures below their floors, kept by --allow-implausible\n";
    for (const auto& s : m.implausible) y << "  - " << quoted(s) << "\n";
  }
  return y.str();
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

double isa_nominal_gflops(const std::string& precision, std::string& isa) {
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
  if (precision == "double") return fp32 / 2;
  if (precision == "bf16") {
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx512 && __builtin_cpu_supports("avx512bf16")) return 2 * fp32;
#endif
    return fp32;
  }
  return fp32;
#endif
}

std::vector<std::string> implausible_figures(const MachineFile& m, const std::map<std::string, double>& nominal_default,
                                             double link_floor_gbs) {
  std::vector<std::string> bad;
  for (const auto& [prec, classes] : m.rates.gemm_gflops) {
    const auto own = m.nominal_gemm.find(prec);
    const auto def = nominal_default.find(prec);
    const double nominal = own != m.nominal_gemm.end() ? own->second : def != nominal_default.end() ? def->second : 0;
    if (nominal <= 0) continue;
    for (const auto& [cls, v] : classes)
      if (v < 0.01 * nominal)
        bad.push_back("gemm_gflops." + prec + "." + cls + ": " + fmt(v) + " GFLOP/s is below 1% of the nominal " +
                      fmt(nominal) + " GFLOP/s (" + (own != m.nominal_gemm.end() ? "nominal.gemm_gflops" : "the ISA floor") +
                      ")");
  }
  for (const auto& [prec, families] : m.rates.step_scale)
    for (const auto& [family, v] : families)
      if (v < kStepScaleRange[0] || v > kStepScaleRange[1])
        bad.push_back("step_scale." + prec + "." + family + ": " + fmt(v) + " is outside [" + fmt(kStepScaleRange[0]) + ", " +
                      fmt(kStepScaleRange[1]) + "] (a step far from the rates measured alone: a machine busy with other work?)");
  const double floor = m.link_floor_gbs > 0 ? m.link_floor_gbs : link_floor_gbs;
  for (const auto& [scope, ops] : m.rates.links)
    for (const auto& [op, l] : ops)
      if (l.gbs < floor)
        bad.push_back("links." + scope + "." + op + ": " + fmt(l.gbs) + " GB/s is below the link floor " + fmt(floor) + " GB/s");
  return bad;
}

}  // namespace minilst
