// `minilst plan DECK --ranks N`: what every rank of a run would need, predicted
// by the analytic models without running, allocating or launching anything:
// memory per category (device and host) per rank, the layout, the chunk counts
// `auto` would choose, the FLOPs per step, the communication volume per step per
// rank, and the arena a planned run would allocate; with a device (--device NAME,
// a preset of a real device's capacity, or --device-mib) less a runtime reserve
// (--reserve-mib), --host-mib, --activation-mib and --max-seq-len, the longest
// sequence whose planned run fits, by bisection: with memory.planner plan the
// device memory checked is the one a run holds (the buffers outside the step plus
// the step arena its planner builds), not the ideal high-water.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "job/machine.hpp"
#include "io/deck.hpp"
#include "memory/planner.hpp"
#include "model/time_model.hpp"

namespace minilst {

// The deck's chunk counts for S local tokens: the deck's, or the smallest that
// fits mst.chunk_budget_mib (auto).
ModelOptions resolve_chunks(const Deck& deck, const ModelConfig& cfg, std::int64_t S, std::size_t scalar_bytes);

// A device's memory as its driver reports it (what `minilst plan --device NAME` budgets).
struct DevicePreset {
  const char* name;    // --device NAME
  const char* label;   // the device as its vendor names it
  double mib;          // capacity per device, MiB (nvidia-smi's memory.total; ROCm's VRAM pool)
  double host_mib;     // > 0: the host memory beside each device (the default --host-mib), MiB
  const char* source;  // where the figures come from
};
const std::vector<DevicePreset>& device_presets();
const DevicePreset* find_device(const std::string& name);  // nullptr: no such preset
std::string device_list(const std::string& format);        // `--device list`: text or json

// The runtime reserve kept off the device budget (CUDA context, NCCL's buffers, the
// allocator's slack) when --reserve-mib is not given: 4096 MiB, or a sixteenth of the
// device where that is less (CPU-scale budgets of a few MiB).
constexpr double kDefaultReserveMiB = 4096;
double default_reserve_mib(double device_mib);

struct PlanArgs {
  int ranks = 1;                // the world size N = data parallel x ulysses x ring
  std::string format = "text";  // text | json
  std::string device;           // --device NAME: a preset ("" : none)
  double device_mib = 0;        // > 0: the device's memory per rank (the preset's, or --device-mib)
  double reserve_mib = -1;      // kept off device_mib for the runtime (< 0: the default, resolved)
  double host_mib = 0;          // > 0: a host budget per rank (offload kinds)
  bool host_from_device = false;  // host_mib is the preset's host memory (not --host-mib)
  double activation_mib = 0;    // > 0: a device budget per rank for all but weights, gradients, optimizer
  bool max_seq_len = false;     // bisect for the longest run.seq_len within the budgets
  bool arena = true;            // plan the step arena of every rank shape too
  std::string machine;          // --machine FILE.yaml: predict the step time on it (docs/time_model.md)
  int top = 5;                  // --max-seq-len with --machine: the layouts printed
  // The device budget per rank: the device less the reserve (0: none).
  double device_budget_mib() const { return device_mib > 0 ? device_mib - std::max(0.0, reserve_mib) : 0; }
};

// The preset's figures and the default reserve filled in; "" or why the request is
// wrong, naming the flag (a command-line error: exit 2).
std::string resolve_budgets(PlanArgs& args);

struct Plan {
  std::int64_t seq_len = 0;
  int ranks = 1, data_parallel = 1, busiest = 0;       // busiest: the sp rank with the most device memory
  ModelOptions options;                                // of the busiest rank (chunk counts, policy, alpha)
  std::int64_t local_tokens = 0;                       // of the busiest rank
  std::map<std::string, std::uint64_t> memory, memory_min;  // category -> max / min over ranks
  std::map<std::string, std::uint64_t> comm;           // operation -> max bytes per step over ranks
  double flops_per_step = 0;                           // model FLOPs of one step, all ranks
  std::uint64_t arena_bytes = 0, arena_lower_bound = 0;  // of the rank shape that holds the most (below)
  std::string arena_method;
  // The device memory a run holds at its peak on its fullest rank: with memory.planner plan
  // and the arena planned, the buffers outside the step (the model states, ...) plus the
  // step arena; else the high-water of the buffers (memory["device_total"]).
  std::uint64_t device_planned = 0, device_outside_arena = 0;
};

// Empty error when the deck can run on args.ranks ranks at this S; else why not.
Plan plan_deck(const Deck& deck, std::int64_t seq_len, const PlanArgs& args, std::string& error);
// The step time of the plan on a machine (model/time_model.hpp), for the plan's busiest rank.
StepTime predict_plan_time(const Deck& deck, const Plan& plan, const MachineRates& machine);
// One call for a run that records its prediction: the deck on `ranks` ranks of `machine`
// (error: why the deck cannot run there; the times are then empty).
StepTime predict_deck_time(const Deck& deck, int ranks, const MachineRates& machine, std::string& error);

// Prints the plan (or the longest sequence); returns the exit code (2: bad request).
int run_plan(const Deck& deck, const PlanArgs& args);

// Before anything is allocated: the plan's busiest rank against what the ranks
// have ("" when it fits; else why not, with the numbers). A lower bound (weights,
// gradients, AdamW moments and one [S_local, d] activation) is checked first, so
// that impossible sizes are refused without modelling them.
std::string check_fits(const Deck& deck, int ranks, const AvailableMemory& available);

}  // namespace minilst
