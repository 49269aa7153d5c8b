// Whether a run fits what its ranks have, decided before anything is allocated: a lower bound
// first (the model states and one [S_local, d] activation, cheap: impossible sizes are refused
// without modelling the step), then the run's plan (predict/deck_plan.hpp) against the memory.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "io/deck.hpp"
#include "predict/deck_plan.hpp"

namespace minilst {

// What a rank may use: host memory (the node's available memory shared by its ranks) and, on a
// GPU, the device's free memory (job/node_resources.hpp measures them).
struct AvailableMemory {
  double host = 0, device = 0;  // bytes; 0 = unknown
};

// "" when the model states (predict_model_states' bytes per rank) and one activation can fit; else
// why not, with the numbers. Also the host budget of optimizer offload's states.
std::string check_lower_bound(const Deck& deck, const std::map<std::string, std::uint64_t>& states,
                              const AvailableMemory& available);

// "" when the plan's fullest rank fits what the ranks have; else why not, with the numbers.
std::string check_fits(const Deck& deck, const DeckPlan& plan, const AvailableMemory& available);

}  // namespace minilst
