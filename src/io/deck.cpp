#include "io/deck.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

namespace minilst {

namespace {

enum class Kind { Int, Float, Choice, Path, ChunkCount };  // ChunkCount: integer >= 1 or "auto"

struct KeySpec {
  std::string section, key, default_value;
  Kind kind;
  double min = 0;                    // Int/Float: inclusive lower bound
  std::vector<std::string> choices;  // Choice
  std::string help;
  double max = HUGE_VAL;             // Float: inclusive upper bound
  bool or_auto = false;              // Float: `auto` is a value too
  std::string name() const { return section + "." + key; }
};

// The one table of deck keys.
const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> keys = {
      {"model", "hidden", "256", Kind::Int, 1, {}, "hidden size d; divisible by model.heads"},
      {"model", "layers", "4", Kind::Int, 1, {}, "decoder layers L"},
      {"model", "heads", "8", Kind::Int, 1, {}, "query heads H; head dim h = hidden/heads must be even (RoPE)"},
      {"model", "kv_heads", "4", Kind::Int, 1, {}, "key/value heads G; divides model.heads (G=H: MHA, G=1: MQA)"},
      {"model", "intermediate", "688", Kind::Int, 1, {}, "MLP intermediate size I"},
      {"model", "vocab", "4096", Kind::Int, 2, {}, "vocabulary size V"},
      {"model", "rope_theta", "10000", Kind::Float, 1e-300, {}, "RoPE base theta (> 0)"},
      {"model", "norm_eps", "1e-5", Kind::Float, 0, {}, "RMSNorm epsilon (>= 0)"},
      {"run", "seq_len", "512", Kind::Int, 2, {}, "sequence length S (tokens per micro-step)"},
      {"run", "steps", "10", Kind::Int, 1, {}, "training steps"},
      {"run", "warmup_steps", "1", Kind::Int, 0, {}, "first steps left out of the timing statistics; < run.steps"},
      {"run", "grad_accum", "1", Kind::Int, 1, {}, "micro-steps per optimizer step"},
      {"run", "precision", "float", Kind::Choice, 0, {"float", "double"}, "scalar type"},
      {"run", "seed", "1234", Kind::Int, 0, {}, "seed of the parameters and the synthetic data"},
      {"run", "learning_rate", "3e-4", Kind::Float, 0, {}, "AdamW learning rate (>= 0)"},
      {"run", "weight_decay", "0.1", Kind::Float, 0, {}, "AdamW decoupled weight decay (>= 0)"},
      {"run", "init_std", "0.02", Kind::Float, 0, {}, "std of the normal init of weight matrices"},
      {"run", "norm_init_noise", "0", Kind::Float, 0, {}, "norm weights start at 1 + normal(0, this) (0: ones)"},
      {"parallel", "ulysses", "1", Kind::Int, 1, {}, "Ulysses degree U: divides model.heads; kv heads a multiple or divisor"},
      {"parallel", "ring", "1", Kind::Int, 1, {}, "ring degree R; world = D x U x R (D data parallel)"},
      {"parallel", "ring_layout", "zigzag", Kind::Choice, 0, {"zigzag", "contiguous"}, "tokens of ring members"},
      {"parallel", "ring_variant", "flash", Kind::Choice, 0, {"flash", "rsa"}, "ring attention algorithm"},
      {"parallel", "ring_overlap", "true", Kind::Choice, 0, {"true", "false"}, "overlap ring transfers with compute"},
      {"mst", "mlp_chunks", "auto", Kind::ChunkCount, 1, {}, "MLP mini-sequences M (1 = unchunked) or auto"},
      {"mst", "lm_head_chunks", "auto", Kind::ChunkCount, 1, {}, "LM head + loss mini-sequences (1 = unchunked) or auto"},
      {"mst", "chunk_budget_mib", "256", Kind::Float, 1e-300, {},
       "auto: smallest M whose chunk intermediates fit this many MiB (> 0)"},
      {"memory", "policy", "full", Kind::Choice, 0, {"full", "checkpoint", "checkpoint_offload", "offload", "vanilla"},
       "activations kept for backward (offload kinds: in host memory; vanilla: the papers' baseline, no chunks)"},
      {"memory", "offload_alpha", "auto", Kind::Float, 0, {},
       "offload: token fraction of q, k, v, y in host memory, the rest recomputed; auto = fit the copy "
       "into a layer's compute", 1.0, true},
      {"memory", "offload_bandwidth_gbs", "0", Kind::Float, 0, {},
       "host copy engine: modelled host link in GB/s (0 = unthrottled; host builds only)"},
      {"memory", "host_budget_mib", "auto", Kind::Float, 1e-300, {},
       "host memory for offloaded activations per rank (> 0); auto = 3/4 of the node's memory / its ranks",
       HUGE_VAL, true},
      {"memory", "planner", "plan", Kind::Choice, 0, {"plan", "none"},
       "plan: the warm-up step is recorded and planned, later steps run in one arena; none: a buffer per request"},
      {"memory", "planner_solver", "greedy", Kind::Choice, 0, {"greedy", "exact"},
       "memory plan solver: greedy best-fit, or exact (MIP, GLPK) on small traces"},
      {"output", "metrics", "auto", Kind::Path, 0, {}, "HDF5 metrics file; auto = minilst_<UTC>_<jobid|pid>.h5"},
      {"output", "dump", "", Kind::Path, 0, {}, "HDF5 tensor dump of step 1 (params, grads, loss); empty = none"},
  };
  return keys;
}

const KeySpec* find_key(const std::string& section, const std::string& key) {
  for (const auto& k : schema())
    if (k.section == section && k.key == key) return &k;
  return nullptr;
}

std::string known_keys(const std::string& section) {
  std::string out;
  for (const auto& k : schema())
    if (k.section == section) out += (out.empty() ? "" : ", ") + k.key;
  return out;
}

[[noreturn]] void unknown_key(const std::string& section, const std::string& key) {
  bool section_known = false;
  for (const auto& k : schema()) section_known |= k.section == section;
  if (!section_known)
    throw DeckError("deck: unknown section '" + section + "' (sections: model, run, parallel, mst, memory, output)");
  throw DeckError("deck: unknown key '" + section + "." + key + "' (keys of '" + section +
                  "': " + known_keys(section) + ")");
}

// Shortest text that reads back as x, in a form YAML 1.1 readers (PyYAML) take
// for a float: a '.' in the mantissa, a signed exponent ("3.0e-04", "10000.0").
std::string yaml_float(double x) {
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string t = buf;
  const auto e = t.find('e');
  std::string mantissa = t.substr(0, e), exponent = e == std::string::npos ? "" : t.substr(e);
  if (mantissa.find('.') == std::string::npos) mantissa += ".0";
  return mantissa + exponent;
}

// Typed value of one key, validated against its spec.
struct Value {
  std::string text;
  long long i = 0;
  double f = 0;
};

Value convert(const KeySpec& spec, const std::string& text) {
  Value v{text};
  const std::string where = "deck: " + spec.name() + " = '" + text + "': ";
  std::size_t used = 0;
  switch (spec.kind) {
    case Kind::Int:
      try { v.i = std::stoll(text, &used); } catch (...) { used = 0; }
      if (used == 0 || used != text.size()) throw DeckError(where + "expected an integer");
      if (v.i < spec.min)
        throw DeckError(where + "must be >= " + std::to_string(static_cast<long long>(spec.min)));
      break;
    case Kind::Float:
      if (spec.or_auto && text == "auto") break;
      try { v.f = std::stod(text, &used); } catch (...) { used = 0; }
      if (used == 0 || used != text.size() || !std::isfinite(v.f))
        throw DeckError(where + "expected a finite number" + (spec.or_auto ? " or 'auto'" : ""));
      v.text = yaml_float(v.f);
      if (v.f < spec.min || v.f > spec.max) {
        std::ostringstream msg;
        if (spec.max < HUGE_VAL)
          msg << where << "must be in [" << spec.min << ", " << spec.max << "]";
        else
          msg << where << "must be " << (spec.min > 0 ? "> 0" : ">= " + yaml_float(spec.min));
        throw DeckError(msg.str());
      }
      break;
    case Kind::Choice: {
      bool ok = false;
      std::string list;
      for (const auto& c : spec.choices) {
        ok |= c == text;
        list += (list.empty() ? "" : "|") + c;
      }
      if (!ok) throw DeckError(where + "allowed values: " + list);
      break;
    }
    case Kind::ChunkCount:
      if (text == "auto") break;
      try { v.i = std::stoll(text, &used); } catch (...) { used = 0; }
      if (used == 0 || used != text.size() || v.i < 1)
        throw DeckError(where + "expected an integer >= 1 or 'auto'");
      break;
    case Kind::Path: break;
  }
  return v;
}

void check(bool ok, const std::string& message) {
  if (!ok) throw DeckError("deck: " + message);
}

}  // namespace

std::string to_string(MemoryPolicy p) {
  switch (p) {
    case MemoryPolicy::full: return "full";
    case MemoryPolicy::checkpoint: return "checkpoint";
    case MemoryPolicy::checkpoint_offload: return "checkpoint_offload";
    case MemoryPolicy::offload: return "offload";
    case MemoryPolicy::vanilla: return "vanilla";
  }
  return "?";
}

Deck load_deck(const std::string& path, const std::vector<std::string>& overrides) {
  if (!std::filesystem::is_regular_file(path)) throw DeckError("deck: file '" + path + "' not found");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw DeckError("deck: '" + path + "' is not valid YAML: " + e.what());
  }
  if (root && !root.IsNull() && !root.IsMap()) throw DeckError("deck: '" + path + "' must be a map of sections");

  std::map<std::string, std::string> given;  // "section.key" -> text
  for (const auto& section : root) {
    const auto sname = section.first.as<std::string>();
    if (known_keys(sname).empty()) unknown_key(sname, "");
    if (section.second.IsNull()) continue;  // an empty section: all defaults
    if (!section.second.IsMap()) throw DeckError("deck: section '" + sname + "' must be a map of keys");
    for (const auto& kv : section.second) {
      const auto key = kv.first.as<std::string>();
      if (!find_key(sname, key)) unknown_key(sname, key);
      if (!kv.second.IsScalar()) throw DeckError("deck: " + sname + "." + key + " must be a single value");
      given[sname + "." + key] = kv.second.as<std::string>();
    }
  }
  for (const auto& o : overrides) {
    const auto eq = o.find('='), dot = o.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq)
      throw DeckError("--set '" + o + "': expected section.key=value");
    const auto section = o.substr(0, dot), key = o.substr(dot + 1, eq - dot - 1);
    if (!find_key(section, key)) unknown_key(section, key);
    given[section + "." + key] = o.substr(eq + 1);
  }

  std::map<std::string, Value> v;
  for (const auto& spec : schema()) {
    const auto it = given.find(spec.name());
    v[spec.name()] = convert(spec, it == given.end() ? spec.default_value : it->second);
  }

  Deck d;
  d.path = path;
  auto& m = d.model;
  m.hidden = int(v["model.hidden"].i);
  m.layers = int(v["model.layers"].i);
  m.heads = int(v["model.heads"].i);
  m.kv_heads = int(v["model.kv_heads"].i);
  m.intermediate = int(v["model.intermediate"].i);
  m.vocab = int(v["model.vocab"].i);
  m.rope_theta = v["model.rope_theta"].f;
  m.norm_eps = v["model.norm_eps"].f;
  auto& r = d.run;
  r.seq_len = v["run.seq_len"].i;
  r.steps = int(v["run.steps"].i);
  r.warmup_steps = int(v["run.warmup_steps"].i);
  r.grad_accum = int(v["run.grad_accum"].i);
  r.precision = v["run.precision"].text;
  r.seed = std::uint64_t(v["run.seed"].i);
  r.learning_rate = v["run.learning_rate"].f;
  r.weight_decay = v["run.weight_decay"].f;
  r.init_std = v["run.init_std"].f;
  r.norm_init_noise = v["run.norm_init_noise"].f;
  for (auto p : {MemoryPolicy::full, MemoryPolicy::checkpoint, MemoryPolicy::checkpoint_offload, MemoryPolicy::offload,
                 MemoryPolicy::vanilla})
    if (v["memory.policy"].text == to_string(p)) d.options.policy = p;
  d.memory.alpha_auto = v["memory.offload_alpha"].text == "auto";
  d.options.offload.alpha = d.memory.alpha_auto ? 1.0 : v["memory.offload_alpha"].f;
  d.options.offload.bandwidth_gbs = v["memory.offload_bandwidth_gbs"].f;
  d.memory.host_budget_auto = v["memory.host_budget_mib"].text == "auto";
  d.memory.host_budget_mib = d.memory.host_budget_auto ? 0.0 : v["memory.host_budget_mib"].f;
  d.memory.plan = v["memory.planner"].text == "plan";
  d.memory.exact_solver = v["memory.planner_solver"].text == "exact";
  const auto chunks = [&](const std::string& key) {
    return ChunkSetting{v[key].text == "auto", v[key].text == "auto" ? 0 : int(v[key].i)};
  };
  d.mst.mlp = chunks("mst.mlp_chunks");
  d.mst.lm_head = chunks("mst.lm_head_chunks");
  d.mst.budget_mib = v["mst.chunk_budget_mib"].f;
  d.parallel.ulysses = int(v["parallel.ulysses"].i);
  d.parallel.ring = int(v["parallel.ring"].i);
  d.parallel.layout = v["parallel.ring_layout"].text == "zigzag" ? RingLayout::zigzag : RingLayout::contiguous;
  d.parallel.variant = v["parallel.ring_variant"].text == "flash" ? RingVariant::flash : RingVariant::rsa;
  d.parallel.overlap = v["parallel.ring_overlap"].text == "true";
  d.output.metrics = v["output.metrics"].text;
  d.output.dump = v["output.dump"].text;

  // Rules that relate keys.
  const auto n = [](long long x) { return std::to_string(x); };
  check(m.hidden % m.heads == 0, "model.hidden (" + n(m.hidden) + ") is not divisible by model.heads (" +
                                     n(m.heads) + ")");
  check(m.head_dim() % 2 == 0, "head dim model.hidden/model.heads = " + n(m.head_dim()) +
                                   " must be even (RoPE rotates pairs)");
  check(m.heads % m.kv_heads == 0, "model.heads (" + n(m.heads) + ") is not divisible by model.kv_heads (" +
                                       n(m.kv_heads) + ")");
  check(r.warmup_steps < r.steps, "run.warmup_steps (" + n(r.warmup_steps) + ") must be < run.steps (" +
                                      n(r.steps) + "), or no step is measured");
  check(d.output.metrics != "", "output.metrics must name a file (or be 'auto')");
  // The parallel rules that need no world size (that one is checked at start).
  const auto parallel_error = check_parallel(m, d.parallel, r.seq_len, d.parallel.sequence_parallel());
  check(parallel_error.empty(), parallel_error);

  YAML::Emitter out;
  out << YAML::BeginMap;
  std::string section;
  for (const auto& spec : schema()) {
    if (spec.section != section) {
      if (!section.empty()) out << YAML::EndMap;
      section = spec.section;
      out << YAML::Key << section << YAML::Value << YAML::BeginMap;
    }
    out << YAML::Key << spec.key << YAML::Value << v[spec.name()].text;
  }
  out << YAML::EndMap << YAML::EndMap;
  d.resolved_yaml = out.c_str();
  return d;
}

std::string deck_key_reference() {
  std::ostringstream s;
  for (const auto& k : schema()) {
    std::string rule;
    if (k.kind == Kind::Choice) {
      for (const auto& c : k.choices) rule += (rule.empty() ? "" : "|") + c;
    } else if (k.kind == Kind::ChunkCount) {
      rule = "integer >= 1 | auto";
    } else if (k.kind == Kind::Int) {
      rule = "integer >= " + std::to_string(static_cast<long long>(k.min));
    } else if (k.kind == Kind::Float) {
      rule = k.max < HUGE_VAL ? "number in [" + yaml_float(k.min) + ", " + yaml_float(k.max) + "]" : "number";
      if (k.or_auto) rule += " | auto";
    } else {
      rule = "path";
    }
    s << "  " << k.name() << std::string(k.name().size() < 22 ? 22 - k.name().size() : 1, ' ') << "default "
      << (k.default_value.empty() ? "\"\"" : k.default_value) << "  (" << rule << ")  " << k.help << "\n";
  }
  return s.str();
}

}  // namespace minilst
