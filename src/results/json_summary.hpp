// The JSON summary written beside every metrics file (X.h5 -> X.json), for
// dashboards and checkers that read results without HDF5: the verdict and the
// run rules', the figures of merit, the layout, the machine, the build, the job,
// per-phase times, memory, communication and energy (docs/metrics.md lists the keys).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "io/atomic_write.hpp"
#include "io/output_names.hpp"  // json_summary_path
#include "results/metrics.hpp"

namespace minilst {

// Why the summary of a run writing metrics_path cannot be written ("" when it can): a
// file there that is not a miniLST summary (unless overwrite); a link, a directory, ...
// there or at its temporary name.
std::string json_summary_problem(const std::string& metrics_path, bool overwrite);

nlohmann::ordered_json run_summary_json(const GatheredMetrics& gathered, const RunSummary& summary,
                                        const RunMetrics& local, const std::string& metrics_path);

// Written atomically (io/atomic_write.hpp).
void write_json_summary(const std::string& path, const nlohmann::ordered_json& summary,
                        const std::string& partial_suffix = unique_partial_suffix());

// The summary of a metrics file just written, beside it (json_summary_path), atomically. A summary
// that cannot be written costs a warning on stderr, not the run (a stale summary of an earlier run
// at that name is removed: it would mislead); a name taken by another file during the run is
// rethrown (OutputTaken), for the caller to move the results to a sibling name.
void write_json_summary_beside(const std::string& metrics_path, const GatheredMetrics& gathered,
                               const RunSummary& summary, const RunMetrics& local,
                               const std::string& partial_suffix = unique_partial_suffix());

}  // namespace minilst
