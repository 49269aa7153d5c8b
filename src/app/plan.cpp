#include "app/plan.hpp"

#include <algorithm>
#include <cstdio>

#include <cmath>

#include "app/machine_file.hpp"
#include "core/range.hpp"
#include "memory/activation_store.hpp"
#include "model/comm_model.hpp"
#include "model/flops.hpp"
#include "model/lm_head.hpp"
#include "model/memory_model.hpp"
#include "model/mlp_block.hpp"
#include "model/parameters.hpp"

namespace minilst {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
constexpr long kMaxChunkPasses = 1L << 15;

// Device bytes of the model states: weights, their gradients and the optimizer's moments.
double state_bytes(const Plan& p) {
  return double(p.memory.at("weights") + p.memory.at("gradients") + p.memory.at("optimizer"));
}

// Device bytes besides the model states, of the planned run (outside buffers + arena).
double activation_bytes(const Plan& p) { return double(p.device_planned) - state_bytes(p); }

// Host bytes: offloaded activations and (optimizer offload) the AdamW states.
double host_bytes(const Plan& p) { return double(p.memory.at("host_offload") + p.memory.at("host_optimizer")); }

bool fits(const Plan& p, const PlanArgs& a) {
  return (a.device_mib <= 0 || double(p.device_planned) <= a.device_budget_mib() * kMiB) &&
         (a.host_mib <= 0 || host_bytes(p) <= a.host_mib * kMiB) &&
         (a.activation_mib <= 0 || activation_bytes(p) <= a.activation_mib * kMiB);
}

// The most bytes of a step's buffers alive at once, at their own sizes (the arena's
// lower bound rounds each up to the arena's alignment).
std::uint64_t live_peak(const std::vector<TraceBuffer>& trace) {
  std::vector<PlanItem> items;
  items.reserve(trace.size());
  for (const auto& b : trace) items.push_back({b.bytes, b.begin, b.end});
  return plan_lower_bound(items);
}

// "h100-80gb, NVIDIA H100 80GB HBM3 (SXM5): 81559 MiB less a 4096 MiB reserve = 77463 MiB per rank"
std::string device_text(const PlanArgs& a) {
  const DevicePreset* d = a.device.empty() ? nullptr : find_device(a.device);
  char text[512];
  std::snprintf(text, sizeof text, "%s%s%s: %.10g MiB less a %.10g MiB reserve = %.10g MiB per rank",
                d ? d->name : "--device-mib", d ? ", " : "", d ? d->label : "", a.device_mib,
                std::max(0.0, a.reserve_mib), a.device_budget_mib());
  return text;
}
}  // namespace

const std::vector<DevicePreset>& device_presets() {
  // Capacity per device as the driver reports it (nvidia-smi --query-gpu=memory.total, in MiB;
  // the CUDA runtime's own total, cudaMemGetInfo's, is about 0.5 GiB less on an H100, inside the
  // reserve); the figures as these devices print them in public nvidia-smi and rocminfo output.
  static const std::vector<DevicePreset> presets = {
      {"h100-80gb", "NVIDIA H100 80GB HBM3 (SXM5)", 81559, 0, "nvidia-smi memory.total"},
      {"h100-94gb", "NVIDIA H100 NVL (94 GB HBM3)", 95830, 0, "nvidia-smi memory.total"},
      {"a100-40gb", "NVIDIA A100 40GB (SXM4)", 40960, 0, "nvidia-smi memory.total"},
      {"a100-80gb", "NVIDIA A100 80GB (SXM4)", 81920, 0, "nvidia-smi memory.total"},
      {"h200", "NVIDIA H200 (141 GB HBM3e, SXM)", 143771, 0, "nvidia-smi memory.total"},
      {"gh200", "NVIDIA GH200 480GB (96 GB HBM3 + 480 GB LPDDR5X)", 97871, 457763,
       "nvidia-smi memory.total; host: the Grace CPU's 480 GB (480e9 bytes, NVIDIA's datasheet)"},
      {"b200", "NVIDIA B200 (180 GB HBM3e, HGX)", 183359, 0, "nvidia-smi memory.total"},
      {"mi300x", "AMD Instinct MI300X (192 GB HBM3)", 196592, 0,
       "rocminfo: the GPU's coarse-grained global pool, 201310208 KB"},
  };
  return presets;
}

const DevicePreset* find_device(const std::string& name) {
  for (const auto& d : device_presets())
    if (name == d.name) return &d;
  return nullptr;
}

std::string device_list(const std::string& format) {
  std::string out;
  char line[512];
  if (format == "json") {
    out = "{\"default_reserve_mib\": " + std::to_string(int(kDefaultReserveMiB)) + ", \"devices\": [";
    const char* sep = "";
    for (const auto& d : device_presets()) {
      std::snprintf(line, sizeof line,
                    "%s{\"name\": \"%s\", \"label\": \"%s\", \"capacity_mib\": %.0f, \"host_mib\": %.0f, "
                    "\"source\": \"%s\"}",
                    sep, d.name, d.label, d.mib, d.host_mib, d.source);
      out += line;
      sep = ", ";
    }
    return out + "]}\n";
  }
  out = "device presets (minilst plan DECK --device NAME): the memory of one device as its driver reports it\n";
  std::snprintf(line, sizeof line, "  %-10s %9s %9s  %-50s %s\n", "name", "MiB", "host MiB", "device", "source");
  out += line;
  for (const auto& d : device_presets()) {
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

std::string resolve_budgets(PlanArgs& a) {
  if (!a.device.empty()) {
    const DevicePreset* d = find_device(a.device);
    if (!d) return "--device: unknown device '" + a.device + "' (`minilst plan --device list` lists the presets)";
    if (a.device_mib > 0 && a.device_mib != d->mib)
      return "--device " + a.device + " and --device-mib: give the device's memory once";
    a.device_mib = d->mib;
    if (a.host_mib <= 0 && d->host_mib > 0) {
      a.host_mib = d->host_mib;
      a.host_from_device = true;
    }
  }
  if (a.reserve_mib >= 0 && a.device_mib <= 0)
    return "--reserve-mib: a reserve is kept off a device: give --device NAME or --device-mib MIB";
  if (a.reserve_mib < 0 && a.device_mib > 0) a.reserve_mib = default_reserve_mib(a.device_mib);
  if (a.device_mib > 0 && a.reserve_mib >= a.device_mib) {
    char msg[256];
    std::snprintf(msg, sizeof msg, "--reserve-mib: a reserve of %.10g MiB leaves nothing of the device's %.10g MiB",
                  a.reserve_mib, a.device_mib);
    return msg;
  }
  return "";
}

namespace {
std::string layout_of(const Deck& deck, const Plan& p) {
  const auto& par = deck.parallel;
  std::string s = std::to_string(p.ranks) + " rank(s) = " + std::to_string(p.data_parallel) + " data-parallel x " +
                  std::to_string(par.ulysses) + " ulysses x " + std::to_string(par.ring) + " ring";
  if (par.ring > 1) s += " (" + name_of(par.layout) + ", " + name_of(par.variant) + ")";
  if (par.zero > 0) s += ", ZeRO stage " + std::to_string(par.zero);
  if (deck.memory.optimizer_offload) s += ", optimizer offload";
  return s;
}

// extra_json: more keys for the JSON object (", \"k\": v..."); extra_text: lines after the text.
void print(const Deck& deck, const Plan& p, const PlanArgs& a, const char* note, const std::string& extra_json = "",
           const std::string& extra_text = "") {
  const std::string policy = name_of(p.options.policy), precision = name_of(deck.run.precision);
  const int mlp = effective_chunks(p.local_tokens, p.options.mlp_chunks);
  const int head = effective_chunks(p.local_tokens, p.options.lm_head_chunks);
  const DevicePreset* preset = a.device.empty() ? nullptr : find_device(a.device);
  if (a.format == "json") {
    std::printf("{\"seq_len\": %lld, \"ranks\": %d, \"data_parallel\": %d, \"ulysses\": %d, \"ring\": %d, "
                "\"zero_stage\": %d, \"optimizer_offload\": %s, "
                "\"policy\": \"%s\", \"offload_alpha\": %.6g, \"precision\": \"%s\", \"local_tokens\": %lld, "
                "\"mlp_chunks\": %d, \"lm_head_chunks\": %d, \"flops_per_step\": %.6e, \"arena_bytes\": %llu, "
                "\"arena_lower_bound_bytes\": %llu, \"device_planned_bytes\": %llu, \"device_outside_arena_bytes\": %llu",
                static_cast<long long>(p.seq_len), p.ranks, p.data_parallel, deck.parallel.ulysses, deck.parallel.ring,
                deck.parallel.zero, deck.memory.optimizer_offload ? "true" : "false", policy.c_str(), p.options.offload.alpha, precision.c_str(),
                static_cast<long long>(p.local_tokens), mlp, head, p.flops_per_step,
                static_cast<unsigned long long>(p.arena_bytes), static_cast<unsigned long long>(p.arena_lower_bound),
                static_cast<unsigned long long>(p.device_planned),
                static_cast<unsigned long long>(p.device_outside_arena));
    if (a.device_mib > 0)
      std::printf(", \"device\": {\"name\": \"%s\", \"label\": \"%s\", \"capacity_mib\": %.10g}, \"reserve_mib\": %.10g, "
                  "\"device_budget_mib\": %.10g",
                  preset ? preset->name : "custom", preset ? preset->label : "--device-mib", a.device_mib,
                  std::max(0.0, a.reserve_mib), a.device_budget_mib());
    else
      std::printf(", \"device\": null, \"reserve_mib\": 0, \"device_budget_mib\": 0");
    std::printf(", \"host_budget_mib\": %.10g, \"activation_budget_mib\": %.10g", a.host_mib, a.activation_mib);
    if (a.device_mib > 0 || a.host_mib > 0 || a.activation_mib > 0)
      std::printf(", \"fits\": %s", fits(p, a) ? "true" : "false");
    for (const auto* m : {&p.memory, &p.memory_min, &p.comm}) {
      std::printf(", \"%s\": {", m == &p.memory ? "memory_bytes" : m == &p.memory_min ? "memory_bytes_min" : "comm_bytes");
      const char* sep = "";
      for (const auto& [k, v] : *m) {
        std::printf("%s\"%s\": %llu", sep, k.c_str(), static_cast<unsigned long long>(v));
        sep = ", ";
      }
      std::printf("}");
    }
    std::printf("%s%s}\n", extra_json.c_str(), note[0] ? (std::string(", \"note\": \"") + note + "\"").c_str() : "");
    return;
  }
  std::printf("plan: %s, S = %lld tokens, %s, %s, memory.policy %s", deck.path.c_str(),
              static_cast<long long>(p.seq_len), layout_of(deck, p).c_str(), precision.c_str(),
              policy.c_str());
  if (p.options.policy == MemoryPolicy::offload) std::printf(" (alpha %.4g)", p.options.offload.alpha);
  std::printf("%s%s\n", note[0] ? ": " : "", note);
  if (a.device_mib > 0) std::printf("  device: %s\n", device_text(a).c_str());
  if (a.host_mib > 0)
    std::printf("  host: %.10g MiB per rank%s\n", a.host_mib, a.host_from_device ? " (the device's host memory)" : "");
  if (a.activation_mib > 0) std::printf("  activation budget: %.10g MiB per rank\n", a.activation_mib);
  std::printf("  per rank: up to %lld tokens; mini-sequences: mlp %d, lm_head %d\n",
              static_cast<long long>(p.local_tokens), mlp, head);
  std::printf("  memory per rank, MiB         max        min\n");
  for (const auto& [k, v] : p.memory)
    std::printf("    %-14s %12.2f %10.2f\n", k.c_str(), double(v) / kMiB, double(p.memory_min.at(k)) / kMiB);
  if (p.arena_bytes) {
    std::printf("  step arena (memory.planner plan): %.2f MiB = %.3f x lower bound %.2f MiB (%s)\n",
                double(p.arena_bytes) / kMiB, double(p.arena_bytes) / double(std::max<std::uint64_t>(1, p.arena_lower_bound)),
                double(p.arena_lower_bound) / kMiB, p.arena_method.c_str());
    std::printf("  device memory a planned run holds per rank: %.2f MiB = %.2f MiB outside the step + the arena\n",
                double(p.device_planned) / kMiB, double(p.device_outside_arena) / kMiB);
  }
  if (a.device_mib > 0 || a.host_mib > 0 || a.activation_mib > 0) {
    std::printf("  within the budget: %s", fits(p, a) ? "yes" : "no");
    if (a.device_mib > 0)
      std::printf(" (device %.2f of %.2f MiB)", double(p.device_planned) / kMiB, a.device_budget_mib());
    if (a.host_mib > 0) std::printf(" (host %.2f of %.2f MiB)", host_bytes(p) / kMiB, a.host_mib);
    if (a.activation_mib > 0)
      std::printf(" (activations %.2f of %.2f MiB)", activation_bytes(p) / kMiB, a.activation_mib);
    std::printf("\n");
  }
  std::printf("  communication per step, MiB sent per rank (max):");
  for (const auto& [k, v] : p.comm) std::printf("  %s %.2f", k.c_str(), double(v) / kMiB);
  std::printf("\n  model FLOPs per step: %.4e (%.4e per rank)\n", p.flops_per_step, p.flops_per_step / p.ranks);
  std::printf("%s", extra_text.c_str());
}
}  // namespace

ModelOptions resolve_chunks(const Deck& deck, const ModelConfig& cfg, std::int64_t S, std::size_t bytes) {
  ModelOptions o = deck.options;
  const double budget = deck.mst.budget_mib * kMiB;
  const auto pick = [&](const ChunkSetting& set, std::size_t per_token) {
    return set.automatic ? chunks_for_budget(S, double(per_token * bytes), budget) : set.count;
  };
  o.mlp_chunks = pick(deck.mst.mlp, MlpBlock<float>::workspace_per_token(cfg));
  o.lm_head_chunks = pick(deck.mst.lm_head, LmHeadLoss<float>::workspace_per_token(cfg));
  if (store_plan(o.policy, cfg.layers).whole_sequence) o.mlp_chunks = o.lm_head_chunks = 1;  // no mini-sequences
  return o;
}

namespace {
// One rank shape's prediction, communication and (planned) arena.
struct ShapePlan {
  MemoryPrediction pred;
  std::uint64_t arena = 0, lower_bound = 0, outside = 0, planned = 0;
  std::string method;
};
}  // namespace

Plan plan_deck(const Deck& deck, std::int64_t S, const PlanArgs& args, std::string& error) {
  Plan p;
  p.seq_len = S;
  p.ranks = args.ranks;
  const auto& par = deck.parallel;
  error = check_parallel(deck.model, par, S, args.ranks);
  if (error.empty()) error = check_zero(par, args.ranks, deck.memory.optimizer_offload);
  if (!error.empty()) return p;
  const ZeroOptions zero = zero_options(deck, args.ranks);
  const int P = par.sequence_parallel();
  p.data_parallel = args.ranks / P;
  const std::size_t T = scalar_bytes(deck.run.precision);
  const SequenceLayout layout(S, par.ulysses, par.ring, par.layout, false, deck.options.mask);
  // The arena each rank shape's planner builds (as the run's first step plans it): the device
  // memory a planned run holds is the buffers outside the step plus that arena.
  const bool plan_arena = args.arena && deck.memory.plan;
  const ShapePlan* busiest = nullptr;  // the most device memory (high-water): its options are printed
  const ShapePlan* fullest = nullptr;  // the most device memory a planned run holds
  // Ranks that hold as many tokens, in groups and ring blocks of the same sizes, need the same:
  // each such shape is predicted once.
  std::map<std::vector<std::int64_t>, ShapePlan> seen;
  for (int s = 0; s < P; ++s) {
    const std::int64_t local = layout.tokens(s);
    const int r = s / par.ulysses;
    // the rank's tokens, its group's, the next ring member's (the block it never passes on), its group's members'
    std::vector<std::int64_t> shape{local, layout.group_tokens(r), layout.group_tokens((r + 1) % par.ring)};
    for (int u = 0; u < par.ulysses; ++u) shape.push_back(layout.tokens(r * par.ulysses + u));
    ModelOptions o = resolve_chunks(deck, deck.model, local, T);
    // auto's warm-up step: the most host memory, and the most device memory (any alpha > 0 keeps
    // the row buffers on the device, and the MLP's tensors when it runs in one chunk; alpha 0 keeps neither)
    if (deck.memory.alpha_auto) o.offload.alpha = 1.0;
    // Chunk passes of one step: each costs kernel launches and a model replay event; past
    // millions a step is all overhead (and the model's replay would not fit memory).
    const double passes = double(deck.run.grad_accum) *
                          (double(deck.model.layers) * effective_chunks(local, o.mlp_chunks) +
                           effective_chunks(local, o.lm_head_chunks));
    if (passes > double(kMaxChunkPasses)) {
      error = "mst: " + std::to_string(static_cast<long long>(passes)) +
              " mini-sequence passes per step (run.grad_accum x (model.layers x MLP chunks + LM-head chunks), "
              "for " + std::to_string(static_cast<long long>(local)) + " tokens per rank) exceed " +
              std::to_string(kMaxChunkPasses) + ": raise mst.chunk_budget_mib or set fewer chunks";
      return p;
    }
    auto it = seen.find(shape);
    if (it == seen.end()) {
      ShapePlan sp;
      sp.pred = predict_rank_memory(deck.model, o, par, layout, s, deck.run.grad_accum, deck.run.precision,
                                    o.offload.alpha, zero);
      const std::uint64_t total = sp.pred.bytes.at("device_total");
      sp.planned = total;
      if (plan_arena) {
        const auto plan = plan_step(sp.pred.trace, sp.pred.segments, deck.memory.solver, kArenaAlignment);
        sp.arena = plan.arena_bytes;
        sp.lower_bound = plan.lower_bound_bytes;
        sp.method = plan.method;
        sp.outside = total - std::min(total, live_peak(sp.pred.trace));  // the states and buffers outside the step
        sp.planned = std::max(total, sp.outside + sp.arena);
      }
      it = seen.emplace(std::move(shape), std::move(sp)).first;
    }
    const ShapePlan& sp = it->second;
    for (const auto& [k, v] : sp.pred.bytes) {
      p.memory[k] = s == 0 ? v : std::max(p.memory[k], v);
      p.memory_min[k] = s == 0 ? v : std::min(p.memory_min[k], v);
    }
    // the ring's bytes depend on where the rank sits (how far its blocks travel), not only on its shape
    for (const auto& [k, v] : predict_comm_bytes(deck.model, o, par, layout, s, args.ranks,
                                                 deck.run.grad_accum, deck.run.precision, zero))
      p.comm[k] = std::max(p.comm[k], v);
    if (!busiest || sp.pred.bytes.at("device_total") > busiest->pred.bytes.at("device_total")) {
      busiest = &sp;
      p.busiest = s;
      p.options = o;
      p.local_tokens = local;
    }
    if (!fullest || sp.planned > fullest->planned) fullest = &sp;
  }
  p.flops_per_step = double(deck.run.grad_accum) * p.data_parallel * model_flops_per_sequence(deck.model, double(S));
  p.device_planned = fullest->planned;
  if (plan_arena) {
    p.arena_bytes = fullest->arena;
    p.arena_lower_bound = fullest->lower_bound;
    p.arena_method = fullest->method;
    p.device_outside_arena = fullest->outside;
  }
  return p;
}

StepTime predict_plan_time(const Deck& deck, const Plan& p, const MachineRates& machine) {
  StepShape sh;
  sh.model = deck.model;
  sh.options = p.options;
  if (deck.options.offload.bandwidth_gbs > 0) sh.options.offload.bandwidth_gbs = deck.options.offload.bandwidth_gbs;
  sh.parallel = deck.parallel;
  sh.precision = deck.run.precision;
  sh.grad_accum = deck.run.grad_accum;
  sh.world = p.ranks;
  sh.sp_rank = p.busiest;
  sh.seq_len = p.seq_len;
  sh.layout = SequenceLayout(p.seq_len, deck.parallel.ulysses, deck.parallel.ring, deck.parallel.layout, false,
                             deck.options.mask);
  sh.comm = p.comm;
  sh.offload_bytes = p.memory.count("host_offload") ? p.memory.at("host_offload") : 0;
  // AdamW's elements on this rank: its shard of every unit (ZeRO >= 1), else every parameter
  const auto sl = shard_layout(deck.model, p.ranks, deck.parallel.zero > 0);
  sh.optimizer_elements = deck.parallel.zero > 0 ? sl.shard_total : sl.padded_total;
  sh.optimizer_on_host = deck.memory.optimizer_offload;
  sh.model_flops = p.flops_per_step;
  return predict_step_time(sh, machine);
}

StepTime predict_deck_time(const Deck& deck, int ranks, const MachineRates& machine, std::string& error) {
  PlanArgs args;
  args.ranks = ranks;
  args.arena = false;  // the time needs the layout, chunks and bytes, not the arena
  const Plan p = plan_deck(deck, deck.run.seq_len, args, error);
  if (!error.empty()) return {};
  try {
    return predict_plan_time(deck, p, machine);
  } catch (const std::exception& e) {
    error = e.what();
    return {};
  }
}

namespace {
std::string time_json(const StepTime& t, const MachineFile& m) {
  std::string s = ", \"machine\": {\"name\": \"" + m.rates.name + "\", \"kind\": \"" + m.kind + "\"}";
  char b[128];
  std::snprintf(b, sizeof b, ", \"predicted_step_s\": %.6e, \"predicted_phases\": {", t.step_s);
  s += b;
  const char* sep = "";
  for (const auto& [k, v] : t.phases) {
    std::snprintf(b, sizeof b, "%s\"%s\": %.6e", sep, k.c_str(), v);
    s += b;
    sep = ", ";
  }
  std::snprintf(b, sizeof b, "}, \"predicted_tokens_per_s\": %.6e, \"predicted_mfu\": %.6g", t.tokens_per_s, t.mfu);
  return s + b;
}

std::string time_text(const StepTime& t, const MachineFile& m, int ranks) {
  char b[256];
  std::snprintf(b, sizeof b, "  predicted on %s (%s machine file): step %.4g s, %.4g tokens/s (%.4g per rank), MFU %.3f\n",
                m.rates.name.c_str(), m.kind.c_str(), t.step_s, t.tokens_per_s, t.tokens_per_s / ranks, t.mfu);
  std::string s = b;
  s += "    phase (s per step):";
  for (const char* k : {"forward", "backward", "attention", "alltoall", "ring_wait", "mlp", "lm_head", "recompute",
                        "offload_wait", "grad_reduce", "param_gather", "comm", "optimizer"}) {
    const double v = t.phases.count(k) ? t.phases.at(k) : 0;
    if (v <= 0) continue;
    std::snprintf(b, sizeof b, "  %s %.4g", k, v);
    s += b;
  }
  return s + "\n";
}

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// --max-seq-len --machine: every layout of the ranks (U x R, D = N / (U R)), ZeRO stage,
// chunk setting and (offload) alpha at the deck's run.seq_len, those within the budgets
// ranked by predicted tokens/s. The sweep plans without the step arena (fast, and never
// more memory than a planned run holds); the best are planned again with it, and one that
// no longer fits is dropped.
int run_layout_search(const Deck& deck, const PlanArgs& a, const MachineFile& machine) {
  struct Candidate {
    Deck deck;
    Plan plan;
    StepTime time;
  };
  const std::int64_t S = deck.run.seq_len;
  PlanArgs quick = a;
  quick.arena = false;
  std::vector<Candidate> fit;
  int tried = 0, refused = 0, over = 0;
  std::vector<double> alphas{deck.memory.alpha_auto ? 1.0 : deck.options.offload.alpha};
  if (deck.options.policy == MemoryPolicy::offload)
    for (const double x : {0.0, 0.5, 1.0})
      if (std::find(alphas.begin(), alphas.end(), x) == alphas.end()) alphas.push_back(x);
  std::vector<std::pair<ChunkSetting, ChunkSetting>> chunks{{deck.mst.mlp, deck.mst.lm_head}};
  if (!deck.mst.mlp.automatic || !deck.mst.lm_head.automatic) chunks.push_back({ChunkSetting{}, ChunkSetting{}});
  std::string missing;
  for (const int U : divisors(a.ranks))
    for (const int R : divisors(a.ranks / U))
      for (int zero = 0; zero <= 3; ++zero)
        for (const double alpha : alphas)
          for (const auto& [mlp, head] : chunks) {
            Deck d = deck;
            d.parallel.ulysses = U;
            d.parallel.ring = R;
            d.parallel.zero = zero;
            d.options.offload.alpha = alpha;
            d.memory.alpha_auto = false;
            d.mst.mlp = mlp;
            d.mst.lm_head = head;
            ++tried;
            std::string why;
            Plan p = plan_deck(d, S, quick, why);
            if (!why.empty()) {
              ++refused;
              continue;
            }
            if (!fits(p, a)) {
              ++over;
              continue;
            }
            try {
              const StepTime t = predict_plan_time(d, p, machine.rates);
              fit.push_back({std::move(d), std::move(p), t});
            } catch (const std::exception& e) {
              missing = e.what();
            }
          }
  if (fit.empty()) {
    std::fprintf(stderr, "error: plan: no layout of %d ranks fits the budget at run.seq_len = %lld (%d tried: %d refused "
                 "by a layout rule, %d over the budget)%s%s\n",
                 a.ranks, static_cast<long long>(S), tried, refused, over, missing.empty() ? "" : "; ", missing.c_str());
    return 2;
  }
  // by tokens/s in steps of 0.5% (closer is a tie the model cannot resolve), then the one
  // holding less device memory first
  const auto bucket = [](const Candidate& c) { return std::llround(std::log(c.time.tokens_per_s) / std::log(1.005)); };
  std::stable_sort(fit.begin(), fit.end(), [&](const Candidate& x, const Candidate& y) {
    const auto bx = bucket(x), by = bucket(y);
    return bx != by ? bx > by : x.plan.device_planned < y.plan.device_planned;
  });
  std::vector<const Candidate*> best;
  for (auto& c : fit) {
    if (int(best.size()) >= a.top) break;
    if (a.arena && c.deck.memory.plan) {  // as a run holds it: the step arena too
      std::string why;
      c.plan = plan_deck(c.deck, S, a, why);
      if (!why.empty() || !fits(c.plan, a)) continue;
    }
    best.push_back(&c);
  }
  const auto layout = [](const Candidate& c) {
    const auto& p = c.deck.parallel;
    std::string s = "D" + std::to_string(c.plan.data_parallel) + " U" + std::to_string(p.ulysses) + " R" + std::to_string(p.ring) +
                    " Z" + std::to_string(p.zero);
    if (c.plan.options.policy == MemoryPolicy::offload) {
      char b[32];
      std::snprintf(b, sizeof b, " a%.2g", c.plan.options.offload.alpha);
      s += b;
    }
    s += " mlp" + std::to_string(effective_chunks(c.plan.local_tokens, c.plan.options.mlp_chunks)) + " head" +
         std::to_string(effective_chunks(c.plan.local_tokens, c.plan.options.lm_head_chunks));
    return s;
  };
  if (a.format == "json") {
    std::printf("{\"seq_len\": %lld, \"ranks\": %d, \"machine\": {\"name\": \"%s\", \"kind\": \"%s\"}, \"tried\": %d, "
                "\"refused\": %d, \"over_budget\": %d, \"fit\": %zu, \"layouts\": [",
                static_cast<long long>(S), a.ranks, machine.rates.name.c_str(), machine.kind.c_str(), tried, refused, over,
                fit.size());
    const char* sep = "";
    for (const auto* c : best) {
      const auto& p = c->deck.parallel;
      std::printf("%s{\"layout\": \"%s\", \"data_parallel\": %d, \"ulysses\": %d, \"ring\": %d, \"zero_stage\": %d, "
                  "\"offload_alpha\": %.6g, \"mlp_chunks\": %d, \"lm_head_chunks\": %d, \"device_planned_bytes\": %llu%s}",
                  sep, layout(*c).c_str(), c->plan.data_parallel, p.ulysses, p.ring, p.zero, c->plan.options.offload.alpha,
                  effective_chunks(c->plan.local_tokens, c->plan.options.mlp_chunks),
                  effective_chunks(c->plan.local_tokens, c->plan.options.lm_head_chunks),
                  static_cast<unsigned long long>(c->plan.device_planned), time_json(c->time, machine).c_str());
      sep = ", ";
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf("plan: %s on %d ranks of %s (%s machine file), S = %lld tokens, %s, memory.policy %s: %zu of %d layouts fit "
              "(%d refused by a layout rule, %d over the budget); the best %zu by predicted tokens/s:\n",
              deck.path.c_str(), a.ranks, machine.rates.name.c_str(), machine.kind.c_str(), static_cast<long long>(S),
              name_of(deck.run.precision).c_str(), name_of(deck.options.policy).c_str(), fit.size(), tried, refused, over,
              best.size());
  if (a.device_mib > 0) std::printf("  device: %s\n", device_text(a).c_str());
  std::printf("  %-4s %-30s %12s %12s %10s %12s %12s %7s\n", "rank", "layout", "seq_len", "device MiB", "step s", "tokens/s",
              "tok/s/rank", "MFU");
  int i = 0;
  for (const auto* c : best)
    std::printf("  %-4d %-30s %12lld %12.0f %10.4g %12.4g %12.4g %7.3f\n", ++i, layout(*c).c_str(), static_cast<long long>(S),
                double(c->plan.device_planned) / kMiB, c->time.step_s, c->time.tokens_per_s, c->time.tokens_per_s / a.ranks,
                c->time.mfu);
  if (!best.empty()) std::printf("%s", time_text(best.front()->time, machine, a.ranks).c_str());
  return 0;
}
}  // namespace

int run_plan(const Deck& deck, const PlanArgs& args) {
  if (args.format != "text" && args.format != "json") {
    std::fprintf(stderr, "error: plan: --format must be text or json\n");
    return 2;
  }
  PlanArgs a = args;
  if (const auto problem = resolve_budgets(a); !problem.empty()) {
    std::fprintf(stderr, "error: plan: %s\n", problem.c_str());
    return 2;
  }
  std::string error;
  MachineFile machine;
  if (!a.machine.empty()) {
    try {
      machine = load_machine_file(a.machine);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: plan: --machine: %s\n", e.what());
      return 2;
    }
    for (const auto& b : machine.implausible)
      std::fprintf(stderr, "warning: plan: %s flags an implausible figure: %s\n", a.machine.c_str(), b.c_str());
  }
  if (!a.max_seq_len) {
    const Plan p = plan_deck(deck, deck.run.seq_len, a, error);
    if (!error.empty()) {
      std::fprintf(stderr, "error: plan: %s\n", error.c_str());
      return 2;
    }
    if (a.machine.empty()) {
      print(deck, p, a, "");
      return 0;
    }
    StepTime t;
    try {
      t = predict_plan_time(deck, p, machine.rates);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: plan: --machine %s: %s\n", a.machine.c_str(), e.what());
      return 2;
    }
    print(deck, p, a, "", time_json(t, machine), time_text(t, machine, p.ranks));
    return 0;
  }
  if (a.device_mib <= 0 && a.host_mib <= 0 && a.activation_mib <= 0) {
    std::fprintf(stderr, "error: plan: --max-seq-len needs a budget: --device NAME or --device-mib MIB (and/or "
                 "--host-mib MIB, --activation-mib MIB)\n");
    return 2;
  }
  if (!a.machine.empty()) return run_layout_search(deck, a, machine);
  // Longest S that fits: double until it does not (or 2^40), then bisect. Every length is
  // planned as a run plans it (its step arena included), so the answer is one a run fits.
  const std::int64_t lowest = std::max<std::int64_t>(2, 2LL * deck.parallel.sequence_parallel());
  const Plan first = plan_deck(deck, lowest, a, error);
  if (!error.empty()) {
    std::fprintf(stderr, "error: plan: %s\n", error.c_str());
    return 2;
  }
  if (!fits(first, a)) {
    std::string budget;
    if (a.device_mib > 0) budget += "; device: " + device_text(a);
    if (a.host_mib > 0) budget += "; host: " + std::to_string(std::uint64_t(a.host_mib)) + " MiB per rank";
    if (a.activation_mib > 0)
      budget += "; activations: " + std::to_string(std::uint64_t(a.activation_mib)) + " MiB per rank";
    std::fprintf(stderr, "error: plan: not even S = %lld fits: a planned run needs %.2f MiB of device memory per rank "
                 "(%.2f MiB of it weights, gradients and optimizer moments)%s%s\n",
                 static_cast<long long>(lowest), double(first.device_planned) / kMiB, state_bytes(first) / kMiB,
                 a.host_mib > 0 ? (" and " + std::to_string(std::uint64_t(host_bytes(first)) / (1 << 20)) +
                                   " MiB of host memory").c_str() : "",
                 budget.c_str());
    return 2;
  }
  // A length the program refuses (too many mini-sequence passes, a layout rule) ends the
  // search like one that does not fit; the answer then says which rule bounded it.
  std::string bound;
  const auto fits_at = [&](std::int64_t S) {
    std::string why;
    const Plan p = plan_deck(deck, S, a, why);
    if (why.empty()) return fits(p, a);
    if (bound.empty()) bound = "run.seq_len = " + std::to_string(S) + " is refused: " + why;
    return false;
  };
  const std::int64_t limit = std::int64_t(1) << 40;  // run.seq_len's own limit
  std::int64_t lo = lowest, hi = 2 * lowest;
  while (hi <= limit && fits_at(hi)) lo = hi, hi *= 2;
  if (hi > limit) hi = limit + 1;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits_at(mid) ? lo : hi) = mid;
  }
  const Plan answer = plan_deck(deck, lo, a, error);
  if (!error.empty()) {
    std::fprintf(stderr, "error: plan: %s\n", error.c_str());
    return 2;
  }
  print(deck, answer, a, "the longest run.seq_len within the budget");
  if (lo == limit) std::fprintf(stderr, "note: plan: run.seq_len's own limit (2^40) came before the budget\n");
  else if (!bound.empty()) std::fprintf(stderr, "note: plan: the search met a rule as well as the budget: %s\n", bound.c_str());
  if (!deck.memory.plan && a.device_mib > 0)
    std::fprintf(stderr, "note: plan: memory.planner none: every buffer its own allocation; the allocator's "
                 "fragmentation is not counted (memory.planner plan counts its arena)\n");
  return 0;
}

std::string check_fits(const Deck& deck, int ranks, const AvailableMemory& avail) {
  const double T = double(scalar_bytes(deck.run.precision));
  const double local_tokens = std::ceil(double(deck.run.seq_len) / deck.parallel.sequence_parallel());
  const double host_inputs = 2.0 * 8.0 * double(deck.run.grad_accum) * double(deck.run.seq_len);  // tokens, labels
  const auto refuse = [&](double need, double have, const char* what) {
    char msg[512];
    std::snprintf(msg, sizeof msg,
                  "the run needs %.1f MiB of %s per rank (memory model) but %.1f MiB are available per rank: "
                  "lower run.seq_len, use memory.policy checkpoint or offload, parallel.zero, "
                  "memory.optimizer_offload, or more ranks "
                  "(`minilst plan DECK --max-seq-len --device-mib N` finds what fits)",
                  need / kMiB, what, have / kMiB);
    return std::string(msg);
  };
  // The model states first (cheap): their host part against the host budget, their
  // device part plus one [S_local, d] activation against the memory.
  const auto states = predict_model_states(deck.model, zero_options(deck, ranks), deck.run.precision);
  const double host_states = double(states.at("host_optimizer"));
  if (deck.memory.optimizer_offload && !deck.memory.host_budget_auto &&
      host_states > deck.memory.host_budget_mib * kMiB) {
    char msg[400];
    std::snprintf(msg, sizeof msg,
                  "memory.optimizer_offload keeps %.1f MiB of optimizer states per rank in host memory, more than "
                  "memory.host_budget_mib = %g: raise the budget, or shard the states further (a higher parallel.zero, "
                  "more ranks)",
                  host_states / kMiB, deck.memory.host_budget_mib);
    return msg;
  }
  const bool cuda = avail.device > 0;
  const double budget = cuda ? avail.device : avail.host;
  const double lower = double(states.at("device_total")) + T * local_tokens * deck.model.hidden + (cuda ? 0 : host_states);
  if (budget > 0 && lower > budget) return refuse(lower, budget, cuda ? "device memory" : "memory");
  if (cuda && avail.host > 0 && host_states > avail.host) return refuse(host_states, avail.host, "host memory");
  PlanArgs args;
  args.ranks = ranks;
  args.arena = deck.memory.plan;  // a planned run holds its step arena (and the buffers outside the step)
  std::string error;
  const Plan p = plan_deck(deck, deck.run.seq_len, args, error);
  if (!error.empty()) return error;
  const double device = double(p.device_planned), host = host_bytes(p) + host_inputs;
  if (cuda) {
    if (device > avail.device) return refuse(device, avail.device, "device memory");
    if (avail.host > 0 && host > avail.host) return refuse(host, avail.host, "host memory");
  } else if (avail.host > 0 && device + host > avail.host) {
    return refuse(device + host, avail.host, "memory (device and host are one here)");
  }
  return "";
}

}  // namespace minilst
