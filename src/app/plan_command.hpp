// `minilst plan DECK --ranks N`: what every rank of a run would need (predict/deck_plan.hpp),
// printed as text or JSON: memory per category (device and host) per rank, the layout, the chunk
// counts `auto` would choose, the FLOPs per step, the communication volume per step per rank, and
// the arena a planned run would allocate; with a device (--device NAME, a device of
// predict/device_facts.hpp, or --device-mib) less a runtime reserve (--reserve-mib), --host-mib,
// --activation-mib and --max-seq-len, the longest sequence whose planned run fits; with --machine
// the predicted step time, and with both the layouts that fit ranked by predicted tokens/s
// (predict/layout_search.hpp).
#pragma once

#include <string>

#include "io/deck.hpp"
#include "predict/deck_plan.hpp"

namespace minilst {

// The command's arguments: the budgets, and what to print.
struct PlanArgs : Budgets {
  int ranks = 1;                // the world size N = data parallel x ulysses x ring
  std::string format = "text";  // text | json
  bool max_seq_len = false;     // the longest run.seq_len within the budgets
  bool arena = true;            // plan the step arena of every rank shape too
  std::string machine;          // --machine FILE.yaml: predict the step time on it (docs/time_model.md)
  int top = 5;                  // --max-seq-len with --machine: the layouts printed
};

// Prints the plan (or the longest sequence, or the ranked layouts); returns the exit code (2: bad request).
int run_plan(const Deck& deck, const PlanArgs& args);

}  // namespace minilst
