#include "app/plan.hpp"

#include <algorithm>
#include <cstdio>

#include <cmath>

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

// Device bytes besides the weights, their gradients and the optimizer's moments.
double activation_bytes(const Plan& p) {
  return double(p.memory.at("device_total")) -
         double(p.memory.at("weights") + p.memory.at("gradients") + p.memory.at("optimizer"));
}

// Host bytes: offloaded activations and (optimizer offload) the AdamW states.
double host_bytes(const Plan& p) { return double(p.memory.at("host_offload") + p.memory.at("host_optimizer")); }

bool fits(const Plan& p, const PlanArgs& a) {
  return (a.device_mib <= 0 || double(p.memory.at("device_total")) <= a.device_mib * kMiB) &&
         (a.host_mib <= 0 || host_bytes(p) <= a.host_mib * kMiB) &&
         (a.activation_mib <= 0 || activation_bytes(p) <= a.activation_mib * kMiB);
}

std::string layout_of(const Deck& deck, const Plan& p) {
  const auto& par = deck.parallel;
  std::string s = std::to_string(p.ranks) + " rank(s) = " + std::to_string(p.data_parallel) + " data-parallel x " +
                  std::to_string(par.ulysses) + " ulysses x " + std::to_string(par.ring) + " ring";
  if (par.ring > 1) s += " (" + name_of(par.layout) + ", " + name_of(par.variant) + ")";
  if (par.zero > 0) s += ", ZeRO stage " + std::to_string(par.zero);
  if (deck.memory.optimizer_offload) s += ", optimizer offload";
  return s;
}

void print(const Deck& deck, const Plan& p, const PlanArgs& a, const char* note) {
  const std::string policy = name_of(p.options.policy), precision = name_of(deck.run.precision);
  const int mlp = effective_chunks(p.local_tokens, p.options.mlp_chunks);
  const int head = effective_chunks(p.local_tokens, p.options.lm_head_chunks);
  if (a.format == "json") {
    std::printf("{\"seq_len\": %lld, \"ranks\": %d, \"data_parallel\": %d, \"ulysses\": %d, \"ring\": %d, "
                "\"zero_stage\": %d, \"optimizer_offload\": %s, "
                "\"policy\": \"%s\", \"offload_alpha\": %.6g, \"precision\": \"%s\", \"local_tokens\": %lld, "
                "\"mlp_chunks\": %d, \"lm_head_chunks\": %d, \"flops_per_step\": %.6e, \"arena_bytes\": %llu, "
                "\"arena_lower_bound_bytes\": %llu",
                static_cast<long long>(p.seq_len), p.ranks, p.data_parallel, deck.parallel.ulysses, deck.parallel.ring,
                deck.parallel.zero, deck.memory.optimizer_offload ? "true" : "false", policy.c_str(), p.options.offload.alpha, precision.c_str(),
                static_cast<long long>(p.local_tokens), mlp, head, p.flops_per_step,
                static_cast<unsigned long long>(p.arena_bytes), static_cast<unsigned long long>(p.arena_lower_bound));
    for (const auto* m : {&p.memory, &p.memory_min, &p.comm}) {
      std::printf(", \"%s\": {", m == &p.memory ? "memory_bytes" : m == &p.memory_min ? "memory_bytes_min" : "comm_bytes");
      const char* sep = "";
      for (const auto& [k, v] : *m) {
        std::printf("%s\"%s\": %llu", sep, k.c_str(), static_cast<unsigned long long>(v));
        sep = ", ";
      }
      std::printf("}");
    }
    std::printf("%s}\n", note[0] ? (std::string(", \"note\": \"") + note + "\"").c_str() : "");
    return;
  }
  std::printf("plan: %s, S = %lld tokens, %s, %s, memory.policy %s", deck.path.c_str(),
              static_cast<long long>(p.seq_len), layout_of(deck, p).c_str(), precision.c_str(),
              policy.c_str());
  if (p.options.policy == MemoryPolicy::offload) std::printf(" (alpha %.4g)", p.options.offload.alpha);
  std::printf("%s%s\n", note[0] ? ": " : "", note);
  std::printf("  per rank: up to %lld tokens; mini-sequences: mlp %d, lm_head %d\n",
              static_cast<long long>(p.local_tokens), mlp, head);
  std::printf("  memory per rank, MiB         max        min\n");
  for (const auto& [k, v] : p.memory)
    std::printf("    %-14s %12.2f %10.2f\n", k.c_str(), double(v) / kMiB, double(p.memory_min.at(k)) / kMiB);
  if (p.arena_bytes)
    std::printf("  step arena (memory.planner plan): %.2f MiB = %.3f x lower bound %.2f MiB (%s)\n",
                double(p.arena_bytes) / kMiB, double(p.arena_bytes) / double(std::max<std::uint64_t>(1, p.arena_lower_bound)),
                double(p.arena_lower_bound) / kMiB, p.arena_method.c_str());
  std::printf("  communication per step, MiB sent per rank (max):");
  for (const auto& [k, v] : p.comm) std::printf("  %s %.2f", k.c_str(), double(v) / kMiB);
  std::printf("\n  model FLOPs per step: %.4e (%.4e per rank)\n", p.flops_per_step, p.flops_per_step / p.ranks);
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
  const SequenceLayout layout(S, par.ulysses, par.ring, par.layout, false);
  MemoryPrediction busiest;
  // Ranks that hold as many tokens, in groups and ring blocks of the same sizes, need the same:
  // each such shape is predicted once.
  std::map<std::vector<std::int64_t>, std::pair<MemoryPrediction, std::map<std::string, std::uint64_t>>> seen;
  for (int s = 0; s < P; ++s) {
    const std::int64_t local = layout.tokens(s);
    const int r = s / par.ulysses;
    // the rank's tokens, its group's, the next ring member's (the block it never passes on), its group's members'
    std::vector<std::int64_t> shape{local, layout.group_tokens(r), layout.group_tokens((r + 1) % par.ring)};
    for (int u = 0; u < par.ulysses; ++u) shape.push_back(layout.tokens(r * par.ulysses + u));
    ModelOptions o = resolve_chunks(deck, deck.model, local, T);
    if (deck.memory.alpha_auto) o.offload.alpha = 1.0;  // auto's warm-up step: the most host memory
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
      auto pr = predict_rank_memory(deck.model, o, par, layout, s, deck.run.grad_accum, deck.run.precision,
                                    o.offload.alpha, zero);
      auto cm = predict_comm_bytes(deck.model, o, par, layout, s, args.ranks, deck.run.grad_accum, deck.run.precision,
                                   zero);
      it = seen.insert_or_assign(shape, std::make_pair(std::move(pr), std::move(cm))).first;
    }
    MemoryPrediction pred = it->second.first;
    const auto& comm = it->second.second;
    for (const auto& [k, v] : pred.bytes) {
      p.memory[k] = s == 0 ? v : std::max(p.memory[k], v);
      p.memory_min[k] = s == 0 ? v : std::min(p.memory_min[k], v);
    }
    for (const auto& [k, v] : comm) p.comm[k] = std::max(p.comm[k], v);
    if (s == 0 || pred.bytes.at("device_total") > busiest.bytes.at("device_total")) {
      busiest = std::move(pred);
      p.busiest = s;
      p.options = o;
      p.local_tokens = local;
    }
  }
  p.flops_per_step = double(deck.run.grad_accum) * p.data_parallel * model_flops_per_sequence(deck.model, double(S));
  if (args.arena && deck.memory.plan) {
    const auto plan = plan_step(busiest.trace, busiest.segments, deck.memory.solver, kArenaAlignment);
    p.arena_bytes = plan.arena_bytes;
    p.arena_lower_bound = plan.lower_bound_bytes;
    p.arena_method = plan.method;
  }
  return p;
}

int run_plan(const Deck& deck, const PlanArgs& a) {
  if (a.format != "text" && a.format != "json") {
    std::fprintf(stderr, "error: plan: --format must be text or json\n");
    return 2;
  }
  std::string error;
  if (!a.max_seq_len) {
    const Plan p = plan_deck(deck, deck.run.seq_len, a, error);
    if (!error.empty()) {
      std::fprintf(stderr, "error: plan: %s\n", error.c_str());
      return 2;
    }
    print(deck, p, a, "");
    return 0;
  }
  if (a.device_mib <= 0 && a.host_mib <= 0 && a.activation_mib <= 0) {
    std::fprintf(stderr, "error: plan: --max-seq-len needs a budget: --device-mib MIB (and/or --host-mib, "
                 "--activation-mib MIB)\n");
    return 2;
  }
  // Longest S that fits: double until it does not (or 2^40), then bisect; the
  // arena is planned once, for the answer.
  PlanArgs quick = a;
  quick.arena = false;
  const std::int64_t lowest = std::max<std::int64_t>(2, 2LL * deck.parallel.sequence_parallel());
  const Plan first = plan_deck(deck, lowest, quick, error);
  if (!error.empty()) {
    std::fprintf(stderr, "error: plan: %s\n", error.c_str());
    return 2;
  }
  if (!fits(first, a)) {
    std::fprintf(stderr, "error: plan: not even S = %lld fits: it needs %.2f MiB of device memory per rank "
                 "(%.2f MiB of it weights, gradients and optimizer moments)%s\n",
                 static_cast<long long>(lowest), double(first.memory.at("device_total")) / kMiB,
                 (double(first.memory.at("device_total")) - activation_bytes(first)) / kMiB,
                 a.host_mib > 0 ? (" and " + std::to_string(std::uint64_t(host_bytes(first)) / (1 << 20)) +
                                   " MiB of host memory").c_str() : "");
    return 2;
  }
  // A length the program refuses (too many mini-sequence passes, a layout rule) ends the
  // search like one that does not fit; the answer then says which rule bounded it.
  std::string bound;
  const auto fits_at = [&](std::int64_t S) {
    std::string why;
    const Plan p = plan_deck(deck, S, quick, why);
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
  args.arena = false;
  std::string error;
  const Plan p = plan_deck(deck, deck.run.seq_len, args, error);
  if (!error.empty()) return error;
  const double device = double(p.memory.at("device_total")), host = host_bytes(p) + host_inputs;
  if (cuda) {
    if (device > avail.device) return refuse(device, avail.device, "device memory");
    if (avail.host > 0 && host > avail.host) return refuse(host, avail.host, "host memory");
  } else if (avail.host > 0 && device + host > avail.host) {
    return refuse(device + host, avail.host, "memory (device and host are one here)");
  }
  return "";
}

}  // namespace minilst
