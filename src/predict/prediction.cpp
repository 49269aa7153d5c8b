#include "predict/prediction.hpp"

#include <atomic>

#include "memory/planner.hpp"
#include "memory/step_arena.hpp"
#include "model/parameters.hpp"
#include "predict/comm_model.hpp"

namespace minilst {

namespace {
std::atomic<long> remodels{0};
}  // namespace

std::string predict_for_run(const Deck& deck, int ranks, const AvailableMemory& available, Prediction& out) {
  out.states = predict_model_states(deck.model, zero_options(deck, ranks), deck.run.precision, deck.parallel.tensor);
  if (auto why = check_lower_bound(deck, out.states, available); !why.empty()) return why;
  PlanOptions options;
  options.ranks = ranks;
  options.arena = deck.memory.plan;  // a planned run holds its step arena (and the buffers outside the step)
  options.keep_traces = false;
  std::string error;
  out.plan = plan_deck(deck, deck.run.seq_len, options, error);
  if (!error.empty()) return error;
  out.phase_flops = phase_flops_per_sequence(deck.model, double(deck.run.seq_len));
  return check_fits(deck, out.plan, available);
}

StepTime price_plan(const Deck& deck, const DeckPlan& p, const MachineRates& machine) {
  PricedStep sh;
  const int TP = deck.parallel.tensor;  // (tensor parallel: one rank's slice is priced)
  sh.model = TP > 1 ? local_model(deck.model, tensor_slice(deck.model, TP, 0)) : deck.model;
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
  const auto sl = shard_layout(sh.model, p.ranks / TP, deck.parallel.zero > 0);
  sh.optimizer_elements = deck.parallel.zero > 0 ? sl.shard_total : sl.padded_total;
  sh.optimizer_on_host = deck.memory.optimizer_offload;
  sh.flops = p.flops;
  return predict_step_time(sh, machine);
}

RankPrediction rank_at_alpha(const Deck& deck, const DeckPlan& plan, int s, const ModelOptions& options,
                             double host_alpha) {
  RankPrediction r;
  const RankModel& planned = plan.rank(s);
  // alpha is offload's alone (memory/activation_store.cpp: store_buffers); the other policies keep the plan's
  const bool alphas = options.policy != MemoryPolicy::offload ||
                      (options.offload.alpha == planned.options.offload.alpha && host_alpha == planned.options.offload.alpha);
  const bool same = alphas && options.policy == planned.options.policy && options.mlp_chunks == planned.options.mlp_chunks &&
                    options.lm_head_chunks == planned.options.lm_head_chunks;
  if (same) {
    r.memory = planned.memory;
    r.comm = plan.comm_of.at(std::size_t(s));
    r.arena_bytes = planned.arena;
    return r;
  }
  ++remodels;
  const auto& par = deck.parallel;
  const SequenceLayout layout(plan.seq_len, par.ulysses, par.ring, par.layout, false, deck.options.mask);
  const ZeroOptions zero = zero_options(deck, plan.ranks);
  r.memory = predict_rank_memory(deck.model, options, par, layout, s, deck.run.grad_accum, deck.run.precision, host_alpha, zero);
  r.comm = predict_comm_bytes(deck.model, options, par, layout, s, plan.ranks, deck.run.grad_accum, deck.run.precision, zero);
  if (deck.memory.plan) r.arena_bytes = plan_step(r.memory.trace, r.memory.segments, deck.memory.solver, kArenaAlignment).arena_bytes;
  return r;
}

long rank_remodels() { return remodels.load(); }

}  // namespace minilst
