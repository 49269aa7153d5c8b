// The plan of a deck: what every rank of a run on N ranks would need, predicted by the analytic
// models without running, allocating or launching anything: memory per category (device and host)
// per rank, the chunk counts `auto` chooses, the FLOPs per step, the communication per step per
// rank, and (memory.planner plan) the step arena a planned run allocates; with budgets (a device
// less a runtime reserve, host memory, an activation budget) whether it fits.
//   DeckPlan p = plan_deck(deck, S, {ranks}, error);   p.fits(budgets)
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/comm_ops.hpp"
#include "io/deck.hpp"
#include "predict/flops.hpp"
#include "predict/memory_model.hpp"

namespace minilst {

// The deck's chunk counts for S local tokens: the deck's, or the smallest that
// fits mst.chunk_budget_mib (auto).
ModelOptions resolve_chunks(const Deck& deck, const ModelConfig& cfg, std::int64_t S, std::size_t scalar_bytes);

// What a plan is checked against, per rank (MiB; 0: no such budget).
struct Budgets {
  std::string device;           // --device NAME: a device of predict/device_facts.hpp ("" : none)
  double device_mib = 0;        // > 0: the device's memory (the named device's, or --device-mib)
  double reserve_mib = -1;      // kept off device_mib for the runtime (< 0: the default, resolved)
  double host_mib = 0;          // > 0: a host budget (offload kinds)
  bool host_from_device = false;  // host_mib is the named device's host memory (not --host-mib)
  double activation_mib = 0;    // > 0: a device budget for all but weights, gradients, optimizer
  // The device budget per rank: the device less the reserve (0: none).
  double device_budget_mib() const { return device_mib > 0 ? device_mib - std::max(0.0, reserve_mib) : 0; }
  bool any() const { return device_mib > 0 || host_mib > 0 || activation_mib > 0; }
};
// The named device's figures and the default reserve filled in; "" or why the request is wrong,
// naming the flag (a command-line error).
std::string resolve_budgets(Budgets& b);
// "h100-80gb, NVIDIA H100 80GB HBM3 (SXM5): 81559 MiB less a 4096 MiB reserve = 77463 MiB per rank"
std::string device_text(const Budgets& b);

// One sequence-parallel rank's model; ranks of the same shape share one.
struct RankModel {
  ModelOptions options;          // chunk counts resolved; alpha auto: the warm-up step's (1)
  std::int64_t local_tokens = 0;
  MemoryPrediction memory;       // its trace kept only where PlanOptions::keep_traces
  std::uint64_t arena = 0, lower_bound = 0, outside = 0, planned = 0;  // planned: device bytes a run holds
  std::string method;            // the arena's planner
};

struct PlanOptions {
  int ranks = 1;             // the world size N = data parallel x ulysses x ring
  bool arena = true;         // plan the step arena of every rank shape too (with memory.planner plan)
  bool keep_traces = false;  // keep each shape's buffer trace (a run's record plans its own arena from it)
};

struct DeckPlan {
  std::int64_t seq_len = 0;
  int ranks = 1, data_parallel = 1, busiest = 0;       // busiest: the sp rank with the most device memory
  ModelOptions options;                                // of the busiest rank (chunk counts, policy, alpha)
  std::int64_t local_tokens = 0;                       // of the busiest rank
  std::map<std::string, std::uint64_t> memory, memory_min;  // category -> max / min over ranks
  CommBytes comm{};                                    // operation -> max bytes per step over ranks
  double flops_per_step = 0;                           // model FLOPs of one step, all ranks
  StepFlops flops{};                                   // ... in each of MFU's conventions (flops.hpp)
  std::uint64_t arena_bytes = 0, arena_lower_bound = 0;  // of the rank shape that holds the most (below)
  std::string arena_method;
  // The device memory a run holds at its peak on its fullest rank: with memory.planner plan
  // and the arena planned, the buffers outside the step (the model states, ...) plus the
  // step arena; else the high-water of the buffers (memory["device_total"]).
  std::uint64_t device_planned = 0, device_outside_arena = 0;
  // Per sequence-parallel rank: its shape's model (shapes[shape_of[s]]) and its communication.
  std::vector<RankModel> shapes;
  std::vector<int> shape_of;
  std::vector<CommBytes> comm_of;

  const RankModel& rank(int sp_rank) const { return shapes.at(std::size_t(shape_of.at(std::size_t(sp_rank)))); }
  double state_bytes() const;       // device bytes of weights, gradients and optimizer moments
  double activation_bytes() const;  // device bytes besides the model states, of the planned run
  double host_bytes() const;        // offloaded activations and (optimizer offload) AdamW's states
  bool fits(const Budgets& b) const;
};

// Empty error when the deck can run on options.ranks ranks at this S; else why not.
DeckPlan plan_deck(const Deck& deck, std::int64_t seq_len, const PlanOptions& options, std::string& error);

// What one layer recomputes per sequence of S tokens under the deck's policy (the activation
// store's rules: memory/activation_store.hpp), for the hardware and square FLOP conventions.
RecomputeFlops recompute_flops(const ModelConfig& c, const ModelOptions& o, double S);

// How many deck plans this process has made (a run makes one: a test counts them).
long deck_plans_made();

}  // namespace minilst
