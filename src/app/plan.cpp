#include "app/plan.hpp"

#include <cstdio>

#include "model/chunking.hpp"
#include "model/flops.hpp"
#include "model/lm_head.hpp"
#include "model/memory_model.hpp"
#include "model/mlp_block.hpp"

namespace minilst {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
std::size_t scalar_bytes(const Deck& deck) { return deck.run.precision == "double" ? 8 : 4; }

bool fits(const Plan& p, const PlanArgs& a) {
  return (a.device_mib <= 0 || double(p.memory.at("device_total")) <= a.device_mib * kMiB) &&
         (a.host_mib <= 0 || double(p.memory.at("host_offload")) <= a.host_mib * kMiB);
}

void print(const Deck& deck, const Plan& p, const PlanArgs& a, const char* note) {
  const std::string name = to_string(p.options.policy);
  const char* policy = name.c_str();
  if (a.format == "json") {
    std::printf("{\"seq_len\": %lld, \"policy\": \"%s\", \"offload_alpha\": %.6g, \"precision\": \"%s\", "
                "\"mlp_chunks\": %d, \"lm_head_chunks\": %d, \"flops_per_step\": %.6e, \"memory_bytes\": {",
                static_cast<long long>(p.seq_len), policy, p.options.offload.alpha, deck.run.precision.c_str(),
                effective_chunks(p.seq_len, p.options.mlp_chunks),
                effective_chunks(p.seq_len, p.options.lm_head_chunks), p.flops_per_step);
    const char* sep = "";
    for (const auto& [k, v] : p.memory) {
      std::printf("%s\"%s\": %llu", sep, k.c_str(), static_cast<unsigned long long>(v));
      sep = ", ";
    }
    std::printf("}%s}\n", note[0] ? (std::string(", \"note\": \"") + note + "\"").c_str() : "");
    return;
  }
  std::printf("plan: %s, S = %lld tokens on 1 rank, %s, memory.policy %s", deck.path.c_str(),
              static_cast<long long>(p.seq_len), deck.run.precision.c_str(), policy);
  if (p.options.policy == MemoryPolicy::offload) std::printf(" (alpha %.4g)", p.options.offload.alpha);
  std::printf("%s%s\n", note[0] ? ": " : "", note);
  std::printf("  mini-sequences: mlp %d, lm_head %d\n", effective_chunks(p.seq_len, p.options.mlp_chunks),
              effective_chunks(p.seq_len, p.options.lm_head_chunks));
  std::printf("  memory per rank, MiB:");
  for (const auto& [k, v] : p.memory) std::printf("  %s %.2f", k.c_str(), double(v) / kMiB);
  std::printf("\n  model FLOPs per step: %.4e\n", p.flops_per_step);
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
  return o;
}

Plan plan_deck(const Deck& deck, std::int64_t S) {
  Plan p;
  p.seq_len = S;
  p.options = resolve_chunks(deck, deck.model, S, scalar_bytes(deck));
  if (deck.memory.alpha_auto) p.options.offload.alpha = 1.0;  // auto's warm-up step: the most host memory
  const std::size_t T = scalar_bytes(deck);
  p.memory = predict_memory(deck.model, p.options, S, T, T);
  p.flops_per_step = double(deck.run.grad_accum) * model_flops_per_sequence(deck.model, double(S));
  return p;
}

int run_plan(const Deck& deck, const PlanArgs& a) {
  if (deck.parallel.sequence_parallel() > 1) {
    std::fprintf(stderr, "error: plan: parallel.ulysses x parallel.ring = %d: the plan covers runs without sequence "
                 "parallelism for now (set both to 1)\n", deck.parallel.sequence_parallel());
    return 2;
  }
  if (a.format != "text" && a.format != "json") {
    std::fprintf(stderr, "error: plan: --format must be text or json\n");
    return 2;
  }
  if (!a.max_seq_len) {
    print(deck, plan_deck(deck, deck.run.seq_len), a, "");
    return 0;
  }
  if (a.device_mib <= 0 && a.host_mib <= 0) {
    std::fprintf(stderr, "error: plan: --max-seq-len needs a budget: --device-mib MIB (and/or --host-mib MIB)\n");
    return 2;
  }
  // Longest S that fits: double until it does not (or 2^40), then bisect.
  const std::int64_t limit = std::int64_t(1) << 40;
  if (!fits(plan_deck(deck, 2), a)) {
    std::fprintf(stderr, "error: plan: not even S = 2 fits the budget\n");
    return 2;
  }
  std::int64_t lo = 2, hi = 4;
  while (hi <= limit && fits(plan_deck(deck, hi), a)) lo = hi, hi *= 2;
  if (hi > limit) hi = limit + 1;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(plan_deck(deck, mid), a) ? lo : hi) = mid;
  }
  print(deck, plan_deck(deck, lo), a, "the longest run.seq_len within the budget");
  return 0;
}

}  // namespace minilst
