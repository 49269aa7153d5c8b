// The step time a run predicts for itself (run.machine, `minilst run --machine FILE`): the
// machine file read and checked (predict/machine_file.hpp), or measured at start (probe), and
// the run's one plan (predict/prediction.hpp) priced on it; the phases are kept beside the
// measured ones (results/metrics.hpp), with the file's name and digest.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "io/deck.hpp"
#include "predict/prediction.hpp"

namespace minilst {

// deck.run.machine priced for the run's plan: "" and prediction.time filled, or why not, a message
// naming run.machine and the file (an unreadable or invalid file, a deck the file cannot price: a
// link of the layout it lacks). `warnings`: the figures the file flags as implausible.
// run.machine "probe": the job's ranks are measured first (collective over `comm`, as `minilst
// probe` at the deck's head dim, about 20 s); time.text then holds the machine file, time.digest its FNV-1a.
std::string price_run(const Deck& deck, MPI_Comm comm, Prediction& prediction, std::vector<std::string>& warnings);

// The FNV-1a digest of the file's bytes, 16 hex digits (core/fnv1a.hpp; throws when it cannot be read).
std::string file_digest(const std::string& path);

}  // namespace minilst
