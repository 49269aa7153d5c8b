#include "predict/deck_plan.hpp"

#include <atomic>
#include <cstdio>

#include "core/range.hpp"
#include "core/units.hpp"
#include "memory/activation_store.hpp"
#include "memory/planner.hpp"
#include "memory/step_arena.hpp"
#include "memory/tracker.hpp"
#include "model/lm_head.hpp"
#include "model/mlp_block.hpp"
#include "predict/comm_model.hpp"
#include "predict/device_facts.hpp"
#include "predict/flops.hpp"

namespace minilst {

namespace {
constexpr long kMaxChunkPasses = 1L << 15;
std::atomic<long> plans_made{0};

// The most bytes of a step's buffers alive at once, at their own sizes (the arena's
// lower bound rounds each up to the arena's alignment).
std::uint64_t live_peak(const std::vector<TraceBuffer>& trace) {
  std::vector<PlanItem> items;
  items.reserve(trace.size());
  for (const auto& b : trace) items.push_back({b.bytes, b.begin, b.end});
  return plan_lower_bound(items);
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
  if (store_buffers(o.policy, cfg.layers).whole_sequence) o.mlp_chunks = o.lm_head_chunks = 1;  // no mini-sequences
  return o;
}

std::string resolve_budgets(Budgets& a) {
  if (!a.device.empty()) {
    const DeviceFacts* d = find_device(a.device);
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

std::string device_text(const Budgets& a) {
  const DeviceFacts* d = a.device.empty() ? nullptr : find_device(a.device);
  char text[512];
  std::snprintf(text, sizeof text, "%s%s%s: %.10g MiB less a %.10g MiB reserve = %.10g MiB per rank",
                d ? d->name : "--device-mib", d ? ", " : "", d ? d->label : "", a.device_mib,
                std::max(0.0, a.reserve_mib), a.device_budget_mib());
  return text;
}

double DeckPlan::state_bytes() const {
  const auto of = [&](MemCategory c) { return double(memory.at(category_name(c))); };
  return of(MemCategory::weights) + of(MemCategory::gradients) + of(MemCategory::optimizer);
}
double DeckPlan::activation_bytes() const { return double(device_planned) - state_bytes(); }
double DeckPlan::host_bytes() const {
  return double(memory.at(category_name(MemCategory::host_offload)) + memory.at(category_name(MemCategory::host_optimizer)));
}

bool DeckPlan::fits(const Budgets& a) const {
  return (a.device_mib <= 0 || double(device_planned) <= a.device_budget_mib() * kMiB) &&
         (a.host_mib <= 0 || host_bytes() <= a.host_mib * kMiB) &&
         (a.activation_mib <= 0 || activation_bytes() <= a.activation_mib * kMiB);
}

namespace {
// Sequence-parallel rank s's options: chunk counts resolved for its tokens; alpha auto's warm-up
// step (alpha 1: the most host memory, and the most device memory: any alpha > 0 keeps the row
// buffers on the device, and the MLP's tensors when it runs in one chunk). "" or why the step
// has too many chunk passes.
std::string rank_options(const Deck& deck, std::int64_t local, ModelOptions& o) {
  o = resolve_chunks(deck, deck.model, local, scalar_bytes(deck.run.precision));
  if (deck.memory.alpha_auto) o.offload.alpha = 1.0;
  // Chunk passes of one step: each costs kernel launches and a model replay event; past
  // millions a step is all overhead (and the model's replay would not fit memory).
  const double passes = double(deck.run.grad_accum) *
                        (double(deck.model.layers) * effective_chunks(local, o.mlp_chunks) +
                         effective_chunks(local, o.lm_head_chunks));
  if (passes <= double(kMaxChunkPasses)) return "";
  return "mst: " + std::to_string(static_cast<long long>(passes)) +
         " mini-sequence passes per step (run.grad_accum x (model.layers x MLP chunks + LM-head chunks), "
         "for " + std::to_string(static_cast<long long>(local)) + " tokens per rank) exceed " +
         std::to_string(kMaxChunkPasses) + ": raise mst.chunk_budget_mib or set fewer chunks";
}

// One rank shape's memory and (planned) arena: the buffers outside the step plus the arena its
// planner builds (as the run's first step plans it).
RankModel model_rank(const Deck& deck, const SequenceLayout& layout, int s, const ModelOptions& o, const ZeroOptions& zero,
                     bool plan_arena, bool keep_trace) {
  RankModel m;
  m.options = o;
  m.local_tokens = layout.tokens(s);
  m.memory = predict_rank_memory(deck.model, o, deck.parallel, layout, s, deck.run.grad_accum, deck.run.precision,
                                 o.offload.alpha, zero);
  const std::uint64_t total = m.memory.bytes.at("device_total");
  m.planned = total;
  if (plan_arena) {
    const auto arena = plan_step(m.memory.trace, m.memory.segments, deck.memory.solver, kArenaAlignment);
    m.arena = arena.arena_bytes;
    m.lower_bound = arena.lower_bound_bytes;
    m.method = arena.method;
    m.outside = total - std::min(total, live_peak(m.memory.trace));  // the states and buffers outside the step
    m.planned = std::max(total, m.outside + m.arena);
  }
  if (!keep_trace) m.memory.trace.clear(), m.memory.segments.clear();
  return m;
}

// The plan's maxima (and minima) over the ranks, its busiest and fullest shapes.
void summarise_ranks(DeckPlan& p, bool plan_arena) {
  const RankModel* busiest = nullptr;  // the most device memory (high-water): its options are printed
  const RankModel* fullest = nullptr;  // the most device memory a planned run holds
  for (int s = 0; s < int(p.shape_of.size()); ++s) {
    const RankModel& m = p.rank(s);
    for (const auto& [k, v] : m.memory.bytes) {
      p.memory[k] = s == 0 ? v : std::max(p.memory[k], v);
      p.memory_min[k] = s == 0 ? v : std::min(p.memory_min[k], v);
    }
    for (const CommOp op : all_of<CommOp>()) p.comm[op] = std::max(p.comm[op], p.comm_of[std::size_t(s)][op]);
    if (!busiest || m.memory.bytes.at("device_total") > busiest->memory.bytes.at("device_total")) {
      busiest = &m;
      p.busiest = s;
      p.options = m.options;
      p.local_tokens = m.local_tokens;
    }
    if (!fullest || m.planned > fullest->planned) fullest = &m;
  }
  p.device_planned = fullest->planned;
  if (plan_arena) {
    p.arena_bytes = fullest->arena;
    p.arena_lower_bound = fullest->lower_bound;
    p.arena_method = fullest->method;
    p.device_outside_arena = fullest->outside;
  }
}
}  // namespace

DeckPlan plan_deck(const Deck& deck, std::int64_t S, const PlanOptions& args, std::string& error) {
  ++plans_made;
  DeckPlan p;
  p.seq_len = S;
  p.ranks = args.ranks;
  const auto& par = deck.parallel;
  error = check_parallel(deck.model, par, S, args.ranks);
  if (error.empty()) error = check_zero(par, args.ranks, deck.memory.optimizer_offload);
  if (!error.empty()) return p;
  const ZeroOptions zero = zero_options(deck, args.ranks);
  const int P = par.sequence_parallel();
  p.data_parallel = args.ranks / (P * par.tensor);
  const SequenceLayout layout(S, par.ulysses, par.ring, par.layout, false, deck.options.mask);
  const bool plan_arena = args.arena && deck.memory.plan;
  // Ranks that hold as many tokens, in groups and ring blocks of the same sizes, need the same:
  // each such shape is modelled once.
  std::map<std::vector<std::int64_t>, int> seen;
  for (int s = 0; s < P; ++s) {
    const std::int64_t local = layout.tokens(s);
    const int r = s / par.ulysses;
    // the rank's tokens, its group's, the next ring member's (the block it never passes on), its group's members'
    std::vector<std::int64_t> shape{local, layout.group_tokens(r), layout.group_tokens((r + 1) % par.ring)};
    for (int u = 0; u < par.ulysses; ++u) shape.push_back(layout.tokens(r * par.ulysses + u));
    ModelOptions o;
    if ((error = rank_options(deck, local, o)); !error.empty()) return p;
    auto it = seen.find(shape);
    if (it == seen.end()) {
      p.shapes.push_back(model_rank(deck, layout, s, o, zero, plan_arena, args.keep_traces));
      it = seen.emplace(std::move(shape), int(p.shapes.size()) - 1).first;
    }
    p.shape_of.push_back(it->second);
    // the ring's bytes depend on where the rank sits (how far its blocks travel), not only on its shape
    p.comm_of.push_back(
        predict_comm_bytes(deck.model, o, par, layout, s, args.ranks, deck.run.grad_accum, deck.run.precision, zero));
  }
  summarise_ranks(p, plan_arena);
  const double sequences = double(deck.run.grad_accum) * p.data_parallel;
  p.flops_per_step = sequences * model_flops_per_sequence(deck.model, double(S));
  p.flops = step_flops(deck.model, double(S), sequences, recompute_flops(deck.model, p.options, double(S)));
  return p;
}

RecomputeFlops recompute_flops(const ModelConfig& c, const ModelOptions& o, double S) {
  const double d = c.hidden, Hh = double(c.heads) * c.head_dim(), Gh = double(c.kv_heads) * c.head_dim();
  const double I = c.intermediate, L = c.layers;
  const double proj = 2.0 * S * (d * Hh + 2.0 * d * Gh + Hh * d), attention = 4.0 * Hh * S * (S + 1.0) / 2.0;
  const int mlp_chunks = std::max(1, effective_chunks(std::int64_t(S), o.mlp_chunks));
  const StoreBuffers store = store_buffers(o.policy, c.layers, o.offload.alpha, std::int64_t(S), mlp_chunks);
  RecomputeFlops r;
  if (store.recompute_attention()) r.projections = proj, r.attention = attention;  // the attention block again
  if (!store.mlp_saved) r.mlp = 2.0 * S * 2.0 * d * I;  // the MLP's backward recomputes its gate and up
  if (o.policy == MemoryPolicy::offload && !store.recompute_attention()) {
    // the token rows not in host memory of the layers whose row buffer was reused, their projections
    // (and the MLP when the row set holds it), averaged per layer (ActivationStore::backward_begin)
    int redone = 0;
    for (int l = 0; l < c.layers; ++l) redone += store.row_buffers == 0 || store.reused(Family::rows, l, c.layers);
    const double rows = (store.row_buffers == 0 ? 1.0 : 1.0 - o.offload.alpha) * redone / L;
    r.projections = rows * proj;
    if (store.mlp_saved) r.mlp = rows * 2.0 * S * 3.0 * d * I;
  }
  return r;
}

long deck_plans_made() { return plans_made.load(); }

}  // namespace minilst
