// `minilst plan DECK`: what one rank of a deck needs, predicted by the analytic
// models without running, allocating or launching anything: memory per category
// (device and host), the chunk counts `auto` would choose, the FLOPs per step;
// with --device-mib (and --host-mib) and --max-seq-len, the longest sequence that
// fits, by bisection on the memory model. Covers runs without sequence
// parallelism (parallel.ulysses = parallel.ring = 1) for now.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "io/deck.hpp"

namespace minilst {

// The deck's chunk counts for S local tokens: the deck's, or the smallest that
// fits mst.chunk_budget_mib (auto).
ModelOptions resolve_chunks(const Deck& deck, const ModelConfig& cfg, std::int64_t S, std::size_t scalar_bytes);

struct PlanArgs {
  std::string format = "text";  // text | json
  double device_mib = 0;        // > 0: a device budget per rank
  double host_mib = 0;          // > 0: a host budget per rank (offload kinds)
  bool max_seq_len = false;     // bisect for the longest run.seq_len within the budgets
};

struct Plan {
  std::int64_t seq_len = 0;
  ModelOptions options;                          // resolved chunk counts, policy, alpha
  std::map<std::string, std::uint64_t> memory;  // category -> bytes per rank
  double flops_per_step = 0;
};

Plan plan_deck(const Deck& deck, std::int64_t seq_len);
// Prints the plan (or the longest sequence); returns the exit code (2: bad request).
int run_plan(const Deck& deck, const PlanArgs& args);

}  // namespace minilst
