#include "results/metrics_recorder.hpp"

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "io/h5.hpp"
#include "results/json_summary.hpp"
#include "results/mllog.hpp"

namespace minilst {

MetricsRecorder::MetricsRecorder(MPI_Comm comm, RunMetrics metrics, std::string path)
    : comm_(comm), path_(std::move(path)), metrics_(std::move(metrics)) {
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
}

RunSummary MetricsRecorder::write(bool complete, const std::string& stop_reason, bool final) {
  auto lock = hold();
  metrics_.complete = complete;
  metrics_.stop_reason = stop_reason;
  if (rank_ != 0) return {};
  const auto summary = summarise_metrics(gathered_, metrics_);
  if (!path_.empty()) {
    write_metrics_file(path_, gathered_, summary, metrics_);
    write_json_summary_beside(path_, gathered_, summary, metrics_);
  }
  final_written_ = final;
  return summary;
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
    // A rank other than 0 checks the name as rank 0 did before step 1 (its node may not share rank 0's
    // file system), and builds the file under its own temporary name (rank 0 may be writing too).
    bool with_summary = true;
    if (rank_ != 0) {
      if (const auto problem = h5::prepare_output(path_, "minilst-metrics", false); !problem.empty())
        throw std::runtime_error(problem);
      if (const auto problem = json_summary_problem(path_, false); !problem.empty()) {
        std::fprintf(stderr, "rank %d: no JSON summary written: output.metrics: %s\n", rank_, problem.c_str());
        with_summary = false;
      }
    }
    const std::string suffix = rank_ == 0 ? ".partial" : ".rank" + std::to_string(rank_) + ".partial";
    write_metrics_file(path_, gathered_, summary, m, suffix);
    if (with_summary) write_json_summary_beside(path_, gathered_, summary, m, suffix);
    std::fprintf(stderr, "rank %d: the %d finished step(s) are written to %s (complete = false)\n", rank_,
                 gathered_.nsteps, path_.c_str());
    std::printf("%s\n", result_line("INCOMPLETE (" + m.stop_reason + ")", summary.fom, m.steps.size(),
                                     m.steps.back().loss, gathered_.nranks, summary.mfu_known ? summary.mfu : -1.0,
                                     summary.reportable.verdict(), path_).c_str());
    mllog("run_stop", nullptr, {{"status", "aborted"}, {"reason", m.stop_reason}}, MllogEvent::interval_end);
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
