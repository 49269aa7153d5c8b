// The metrics of a run as it goes, kept so that no way of ending it loses a
// finished step. After every step one all-gather gives every rank every rank's
// records of that step, so whichever rank must end early (its watchdog fired, or
// an error on it) can write the finished steps alone (rescue). The snapshots
// (flushes) and the final file are rank 0's. The metrics file and its JSON summary
// are written together under one stem: the name asked for, or, once either name
// holds a file that is not this run's to replace (put there during the run), a
// sibling (output_names.hpp: m.h5 -> m.<host>-<pid>.h5) that path() then names; a
// rank other than 0 always writes its rescue to its own sibling.
#pragma once

#include <mpi.h>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "results/metrics.hpp"

namespace minilst {

class MetricsRecorder {
 public:
  // Collective. path: the metrics file, the same on every rank ("" = none).
  MetricsRecorder(MPI_Comm comm, RunMetrics metrics, std::string path);

  // Collective: this step's records, on every rank.
  void add_step(StepMetrics step);
  // Collective: `fill` completes a copy of the record (memory, models, provenance; itself
  // collective), and every rank's totals are gathered.
  void record(const std::function<void(RunMetrics&)>& fill);
  // Rank 0 writes the file (complete, or complete = false with stop_reason) and returns
  // the summary; the other ranks return {}. final = false: a snapshot during the run.
  RunSummary write(bool complete, const std::string& stop_reason, bool final = true);
  // Any rank, any thread (the watchdog's): the finished steps written with complete = false
  // and `why`; a message either way. False when nothing could be written.
  bool rescue(const std::string& why) noexcept;

  // The lock a rescue takes: held by the main thread around its other HDF5 writes.
  std::unique_lock<std::timed_mutex> hold() { return std::unique_lock<std::timed_mutex>(mutex_); }
  const RunMetrics& metrics() const { return metrics_; }  // the main thread's view
  // Where the metrics file is written: the name asked for, or the sibling it moved to.
  const std::string& path() const { return target_; }

 private:
  // The metrics file and its JSON summary at target_, moved to a sibling while a name is taken.
  void write_files(const RunSummary& summary, const RunMetrics& m);
  // target_ := the next sibling of path_, with a message saying why (`taken`) and where.
  void move_to_sibling(const std::string& taken);
  // Removes this run's earlier files under the names it moved away from.
  void remove_abandoned();

  MPI_Comm comm_;
  int rank_ = 0;
  std::string path_;        // the name asked for
  std::timed_mutex mutex_;  // guards what follows (and HDF5, which is not thread safe)
  std::string target_;      // where the files go (path_ or a sibling)
  int sibling_ = 0;         // the sibling in use (0: none)
  std::vector<std::string> abandoned_;  // names moved away from whose earlier files are still to remove
  RunMetrics metrics_;
  GatheredMetrics gathered_;
  bool final_written_ = false;  // the complete file is written: a rescue must not replace it
};

}  // namespace minilst
