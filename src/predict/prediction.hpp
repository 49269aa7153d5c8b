// A run's one prediction, computed where the run starts and carried to the fit check, the set-up
// lines, the records, the summary and the JSON: the model states per rank, the deck's plan on the
// job's ranks (every rank's memory and communication, the FLOPs), and, with a machine file, the
// step's time per phase. Nothing downstream plans again: the one exception is alpha auto, whose
// alpha is chosen after the warm-up step; a rank then re-models its own memory and communication
// at the chosen alpha (rank_at_alpha).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "io/deck.hpp"
#include "predict/deck_plan.hpp"
#include "predict/fit_check.hpp"
#include "predict/flops.hpp"
#include "predict/machine_rates.hpp"
#include "predict/time_model.hpp"

namespace minilst {

// The step time predicted on a machine file, and where the file came from.
struct PredictedTime {
  StepTime time;                           // per phase, the step, tokens/s, MFU (the busiest rank)
  std::string machine, kind, file, digest;  // the file's machine name, measured | nominal, path, FNV-1a of its bytes
  std::string text;                        // run.machine: probe: the machine file measured at start (else "")
  bool known() const { return time.step_s > 0; }
};

struct Prediction {
  std::map<std::string, std::uint64_t> states;  // the model states alone, per rank (predict_model_states)
  DeckPlan plan;                                 // the deck at run.seq_len on the job's ranks
  PhaseFlops phase_flops;                        // per sequence, forward + backward (flops.hpp)
  PredictedTime time;                            // with run.machine
};

// The deck on `ranks` ranks, for a run: the lower bound checked against `available`, the plan made
// (its step arena with memory.planner plan, each shape's trace kept), then checked: "" and `out`
// filled, or why the run cannot run or fit.
std::string predict_for_run(const Deck& deck, int ranks, const AvailableMemory& available, Prediction& out);

// The step time of a plan on a machine, for the plan's busiest rank; throws naming a missing rate.
StepTime price_plan(const Deck& deck, const DeckPlan& plan, const MachineRates& machine);

// One rank's memory, communication and step arena as its record states them: the plan's, or, where
// the run's offload alpha (the last step's) or its largest (host_alpha) differ from the plan's under
// memory.policy offload (the one policy alpha changes), re-modelled at them.
struct RankPrediction {
  MemoryPrediction memory;
  CommBytes comm{};
  std::uint64_t arena_bytes = 0;  // the arena this rank's planner builds (memory.planner plan)
};
RankPrediction rank_at_alpha(const Deck& deck, const DeckPlan& plan, int sp_rank, const ModelOptions& options,
                             double host_alpha);

// How many times a rank was re-modelled at another alpha (rank_at_alpha), in this process.
long rank_remodels();

}  // namespace minilst
