// `minilst plan DECK --ranks N`: what every rank of a run would need, predicted
// by the analytic models without running, allocating or launching anything:
// memory per category (device and host) per rank, the layout, the chunk counts
// `auto` would choose, the FLOPs per step, the communication volume per step per
// rank, and the arena a planned run would allocate; with --device-mib (and
// --host-mib) and --max-seq-len, the longest sequence that fits, by bisection.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "job/machine.hpp"
#include "io/deck.hpp"
#include "memory/planner.hpp"

namespace minilst {

// The deck's chunk counts for S local tokens: the deck's, or the smallest that
// fits mst.chunk_budget_mib (auto).
ModelOptions resolve_chunks(const Deck& deck, const ModelConfig& cfg, std::int64_t S, std::size_t scalar_bytes);

struct PlanArgs {
  int ranks = 1;                // the world size N = data parallel x ulysses x ring
  std::string format = "text";  // text | json
  double device_mib = 0;        // > 0: a device budget per rank
  double host_mib = 0;          // > 0: a host budget per rank (offload kinds)
  double activation_mib = 0;    // > 0: a device budget per rank for all but weights, gradients, optimizer
  bool max_seq_len = false;     // bisect for the longest run.seq_len within the budgets
  bool arena = true;            // plan the busiest rank's arena too
};

struct Plan {
  std::int64_t seq_len = 0;
  int ranks = 1, data_parallel = 1, busiest = 0;       // busiest: the sp rank with the most device memory
  ModelOptions options;                                // of the busiest rank (chunk counts, policy, alpha)
  std::int64_t local_tokens = 0;                       // of the busiest rank
  std::map<std::string, std::uint64_t> memory, memory_min;  // category -> max / min over ranks
  std::map<std::string, std::uint64_t> comm;           // operation -> max bytes per step over ranks
  double flops_per_step = 0;                           // model FLOPs of one step, all ranks
  std::uint64_t arena_bytes = 0, arena_lower_bound = 0;
  std::string arena_method;
};

// Empty error when the deck can run on args.ranks ranks at this S; else why not.
Plan plan_deck(const Deck& deck, std::int64_t seq_len, const PlanArgs& args, std::string& error);
// Prints the plan (or the longest sequence); returns the exit code (2: bad request).
int run_plan(const Deck& deck, const PlanArgs& args);

// Before anything is allocated: the plan's busiest rank against what the ranks
// have ("" when it fits; else why not, with the numbers). A lower bound (weights,
// gradients, AdamW moments and one [S_local, d] activation) is checked first, so
// that impossible sizes are refused without modelling them.
std::string check_fits(const Deck& deck, int ranks, const AvailableMemory& available);

}  // namespace minilst
