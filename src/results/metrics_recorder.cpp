#include "results/metrics_recorder.hpp"

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "io/atomic_write.hpp"
#include "io/h5.hpp"
#include "io/output_names.hpp"
#include "results/json_summary.hpp"
#include "results/mllog.hpp"

namespace minilst {

MetricsRecorder::MetricsRecorder(MPI_Comm comm, RunMetrics metrics, std::string path)
    : comm_(comm), path_(std::move(path)), target_(path_), metrics_(std::move(metrics)) {
  MPI_Comm_rank(comm, &rank_);
  gather_totals(comm, metrics_, gathered_);  // zeros until the first record: a rescue always has every dataset
}

void MetricsRecorder::add_step(StepMetrics step) {
  {
    auto lock = hold();
    metrics_.steps.push_back(step);
  }
  const auto row = gather_step(comm_, step);  // may wait for a peer: no lock held
  auto lock = hold();
  append_steps(gathered_, row);
}

void MetricsRecorder::record(const std::function<void(RunMetrics&)>& fill) {
  RunMetrics copy;
  {
    auto lock = hold();
    copy = metrics_;
  }
  fill(copy);
  GatheredMetrics totals = gathered_;
  gather_totals(comm_, copy, totals);
  auto lock = hold();
  metrics_ = std::move(copy);
  gathered_.comm_model = std::move(totals.comm_model);
  gathered_.memory = std::move(totals.memory);
  gathered_.memory_model = std::move(totals.memory_model);
  gathered_.plan = std::move(totals.plan);
  gathered_.attention = std::move(totals.attention);
}

RunSummary MetricsRecorder::write(bool complete, const std::string& stop_reason, bool final) {
  auto lock = hold();
  metrics_.complete = complete;
  metrics_.stop_reason = stop_reason;
  if (rank_ != 0) return {};
  const auto summary = summarise_metrics(gathered_, metrics_);
  if (!path_.empty()) write_files(summary, metrics_);
  final_written_ = final;
  return summary;
}

void MetricsRecorder::write_files(const RunSummary& summary, const RunMetrics& m) {
  constexpr int kSiblings = 4;  // each sibling name taken in turn: someone is creating them on purpose
  for (;;) {
    const std::string json = json_summary_path(target_);
    const bool file_free = may_write(target_), json_free = may_write(json);
    std::string taken = "'" + (file_free ? json : target_) +
                        "' is not this run's to replace: a file was put there by someone else during the run";
    if (file_free && json_free) {
      try {
        write_metrics_file(target_, gathered_, summary, m, unique_partial_suffix());
        write_json_summary_beside(target_, gathered_, summary, m, unique_partial_suffix());
        remove_abandoned();
        return;
      } catch (const OutputTaken& e) {  // taken between the check and the rename
        taken = e.what();
      }
    }
    if (sibling_ == kSiblings)
      throw std::runtime_error("the metrics were not written: '" + path_ + "' and its siblings up to '" + target_ +
                               "' are taken (" + taken + ")");
    move_to_sibling(taken);
  }
}

// This run's earlier snapshots under names it left (the file taken there is not this run's, and stays).
void MetricsRecorder::remove_abandoned() {
  for (const auto& name : abandoned_)
    for (const auto& file : {name, json_summary_path(name)})
      if (remove_if_owned(file))
        std::fprintf(stderr, "output.metrics: this run's earlier snapshot '%s' is removed (its results are in '%s')\n",
                     file.c_str(), target_.c_str());
  abandoned_.clear();
}

void MetricsRecorder::move_to_sibling(const std::string& taken) {
  abandoned_.push_back(target_);
  target_ = sibling_path(path_, process_tag(), ++sibling_);
  std::fprintf(stderr, "warning: output.metrics: %s; it is left untouched, and this run's metrics go to '%s' (JSON summary "
               "'%s')\n", taken.c_str(), target_.c_str(), json_summary_path(target_).c_str());
  std::fflush(stderr);
}

bool MetricsRecorder::rescue(const std::string& why) noexcept {
  try {
    std::unique_lock<std::timed_mutex> lock(mutex_, std::defer_lock);
    if (!lock.try_lock_for(std::chrono::seconds(10))) {
      std::fprintf(stderr, "rank %d: the finished steps could not be written (this rank is busy writing)\n", rank_);
      return false;
    }
    if (final_written_) return false;  // the run's own file is whole: nothing to add
    if (gathered_.nsteps == 0 || path_.empty()) {
      std::fprintf(stderr, "rank %d: %s\n", rank_, path_.empty() ? "no metrics file" : "no step finished: nothing written");
      return false;
    }
    RunMetrics m = metrics_;
    m.steps.resize(std::size_t(gathered_.nsteps));  // a step this rank finished but its peers may not have
    m.complete = false;
    m.stop_reason = why + ": stopped after " + std::to_string(gathered_.nsteps) + " finished step(s)";
    const auto summary = summarise_metrics(gathered_, m);
    // A rank other than 0 writes to a sibling of its own (rank 0 may be writing the name asked
    // for), checked as rank 0 checked that name before step 1 (its node may not share rank 0's
    // file system: the directory is created there too).
    if (rank_ != 0 && sibling_ == 0) {
      target_ = sibling_path(path_, process_tag(), ++sibling_);
      if (const auto problem = h5::prepare_output(target_, "minilst-metrics", false); !problem.empty())
        throw std::runtime_error(problem);
    }
    write_files(summary, m);
    std::fprintf(stderr, "rank %d: the %d finished step(s) are written to %s (complete = false)\n", rank_,
                 gathered_.nsteps, target_.c_str());
    std::printf("%s\n", result_line(std::string(run_verdict(false, summary.valid)) + " (" + m.stop_reason + ")", summary.fom, m.steps.size(),
                                     m.steps.back().loss, gathered_.nranks, summary.mfu_known ? summary.mfu : -1.0,
                                     (m.attributes.text.count("tier") ? m.attributes.text.at("tier") : std::string()), summary.reportable.verdict(), target_).c_str());
    mllog("run_stop", nullptr, {{"status", "aborted"}, {"verdict", run_verdict(false, summary.valid)}, {"reason", m.stop_reason}},
          MllogEvent::interval_end);
    std::fflush(stdout);
    std::fflush(stderr);
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: the finished steps could not be written: %s\n", rank_, e.what());
    return false;
  } catch (...) {
    return false;
  }
}

}  // namespace minilst
