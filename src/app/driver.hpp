// Runs a resolved deck: builds the trainer, runs the steps with a progress line
// each, writes the tensor dump and the metrics file, prints the summary and the
// final RESULT line.
#pragma once

#include "app/run_context.hpp"
#include "io/deck.hpp"

namespace minilst {

// Returns the process exit code: 0 VALID, 2 refused, 3 INVALID, 4 INCOMPLETE (stopped early).
// An error throws, after this rank wrote the finished steps (MetricsRecorder::rescue).
int run_deck(const Deck& deck, const RunContext& ctx);

}  // namespace minilst
