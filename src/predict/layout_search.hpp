// The layout search of `minilst plan --max-seq-len --machine`: every layout of N ranks at the
// deck's run.seq_len (U x R with D = N / (U R)), ZeRO stage 0 to 3, the deck's chunk setting (and
// `auto` where the deck fixes counts), and for memory.policy offload alpha in {the deck's, 0, 0.5,
// 1}; those within the budgets ranked by predicted tokens/s (within 0.5%, a tie the model cannot
// resolve, the layout holding less device memory first). The sweep plans without the step arena
// (fast, and never more memory than a planned run holds); the best `top` (and the best of each
// tensor-parallel degree not among them) are planned again with it, and one that no longer fits is
// dropped.
#pragma once

#include <string>
#include <vector>

#include "io/deck.hpp"
#include "predict/deck_plan.hpp"
#include "predict/machine_rates.hpp"
#include "predict/time_model.hpp"

namespace minilst {

struct LayoutCandidate {
  Deck deck;  // the deck with the layout set
  DeckPlan plan;
  StepTime time;
  std::string name() const;  // "D1 U2 R4 Z3 a0.5 mlp4 head16"
};

struct LayoutSearch {
  std::vector<LayoutCandidate> best;  // the best `top`, ranked
  // The best layout of each tensor-parallel degree the ranked ones leave out (T ascending): what
  // tensor parallelism would give where it does not make the top.
  std::vector<LayoutCandidate> best_by_tensor;
  int tried = 0, refused = 0, over = 0;  // layouts tried; refused by a layout rule; over the budgets
  std::size_t fit = 0;                 // layouts within the budgets
  std::string missing;                 // a rate the machine lacks for some layout (its message)
};

LayoutSearch search_layouts(const Deck& deck, int ranks, const Budgets& budgets, const MachineRates& machine, int top,
                            bool plan_arena);

// The longest run.seq_len whose planned run (its step arena included) fits the budgets: doubled
// until it does not (or 2^40), then bisected. A length the program refuses (too many
// mini-sequence passes, a layout rule) ends the search like one that does not fit. With
// parallel.ulysses_head_chunks auto, each valid count is searched and the longest answer kept.
struct LongestRun {
  std::int64_t seq_len = 0, lowest = 0;  // the answer; the shortest length tried
  DeckPlan plan;                         // at seq_len (or, when not even `lowest` fits, at lowest)
  bool fits = false;                     // false: not even `lowest` fits
  bool hit_limit = false;                // run.seq_len's own limit (2^40) came first
  std::string bound;                     // the rule that refused a length, where one did
  int head_chunks = 0;                   // parallel.ulysses_head_chunks auto: the count chosen (else 0)
};
// error: why the deck cannot run at the shortest length (a layout rule), else "".
LongestRun longest_run(const Deck& deck, int ranks, const Budgets& budgets, bool plan_arena, std::string& error);

}  // namespace minilst
