// The step time a run predicts for itself (run.machine, `minilst run --machine FILE`): the
// machine file read and checked (app/machine_file.hpp), the deck priced on it for the job's
// ranks (predict_deck_time, app/plan.hpp), the phases kept for the metrics beside the
// measured ones (results/metrics.hpp: StepPrediction), with the file's name and digest.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "io/deck.hpp"
#include "results/metrics.hpp"

namespace minilst {

// deck.run.machine priced for `ranks` ranks: "" and `out` filled, or why not, a message naming
// run.machine and the file (an unreadable or invalid file, a deck the file cannot price: a link
// of the layout it lacks). `warnings`: the figures the file flags as implausible. run.machine
// "probe": the job's ranks are measured first (collective over `comm`, as `minilst probe` at
// the deck's head dim, about 20 s); out.text then holds the machine file, out.digest its FNV-1a.
std::string predict_run(const Deck& deck, int ranks, MPI_Comm comm, StepPrediction& out, std::vector<std::string>& warnings);

// The FNV-1a digest of the file's bytes, 16 hex digits (core/fnv1a.hpp; throws when it cannot be read).
std::string file_digest(const std::string& path);

}  // namespace minilst
