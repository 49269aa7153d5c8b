#include "results/run.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "job/stop.hpp"
#include "memory/step_arena.hpp"
#include "parallel/node.hpp"
#include "results/provenance.hpp"
#include "results/mllog.hpp"
#include "results/report.hpp"

namespace minilst {

Run::Run(const Deck& deck, MPI_Comm comm, int rank, MetricsRecorder& recorder, PeakRate peak, ParallelSetup& par,
         FactsSource facts, PhaseTimers& timers, const Prediction& prediction)
    : deck_(deck), comm_(comm), root_(rank == 0), recorder_(recorder), peak_(std::move(peak)), par_(par),
      facts_(std::move(facts)), timers_(timers), energy_(comm), energy_facts_(energy_.attributes(false)),
      prediction_(prediction) {
  MPI_Comm_size(comm, &nranks_);
}

void Run::print_setup(const ModelOptions& opts, const ResolvedKernels& kernels, const AttentionGeometry& g,
                      const std::string& offload) const {
  if (!root_) return;
  minilst::print_setup(deck_, opts, kernels, prediction_.states, g, nranks_, par_.dp_size(), scalar_bytes(deck_.run.precision),
                       offload);
  std::printf("peak for MFU: %.1f GFLOP/s per rank, %s (%s); this run's %s GEMM rate %.1f GFLOP/s per rank (the best "
              "of several shapes, %s on rank 0; mean over ranks)",
              peak_.mfu.gflops, peak_.mfu.kind.c_str(), peak_.mfu.source.c_str(), name_of(deck_.run.precision).c_str(),
              peak_.gflops, peak_.shape.c_str());
  std::printf("\nenergy: %s (%s)\n", energy_.source().c_str(), energy_.note().c_str());
  std::printf("%s\n", flush_policy().c_str());
  mllog("init_stop", nullptr, {}, MllogEvent::interval_end);
  mllog("run_start", nullptr, {}, MllogEvent::interval_start);
}

void Run::begin_step() {
  if (!started_) run_clock_.reset(), started_ = true;
  if (steps_begun_++ == deck_.run.warmup_steps) measure_start_ = sample_cpu(), measuring_ = true;
  timers_.clear();
  energy_.joules_since_last();  // the step's energy starts here
  wall_.reset();
}

void Run::after_step(long step, StepResult r, const std::function<void()>& before_flush) {
  timers_.add(Phase::copy_engine_busy, r.moved.busy_seconds);
  timers_.add(Phase::step, wall_.seconds() - r.dump_seconds);
  const double joules = energy_.joules_since_last();
  recorder_.add_step({r.loss, r.grad_norm, timers_.seconds(), r.comm_bytes,
                      {{"to_host", r.moved.bytes_to_host}, {"to_device", r.moved.bytes_to_device}},
                      StepArena::instance().allocations_in_step(), joules});
  if (step == 0) record();  // what a rescue writes besides the steps
  const double seconds = timers_.get(Phase::step);
  (step < deck_.run.warmup_steps ? warmup_seconds_ : measured_seconds_) += seconds;
  if (root_) {
    const long measured = step + 1 - deck_.run.warmup_steps;  // steps after the warm-up done
    const double per_step = measured > 0 ? measured_seconds_ / double(measured)
                                         : (warmup_seconds_ + measured_seconds_) / double(step + 1);
    const StepProgress progress{run_clock_.seconds(), per_step * double(deck_.run.steps - step - 1)};
    print_step(step, deck_, r.loss, r.grad_norm, seconds, recorder_.metrics().tokens_per_step, progress);
    mllog("train_loss", r.loss, {{"step_num", step + 1}, {"step_seconds", timers_.get(Phase::step)}});
  }
  if (flush_due(step)) {
    if (before_flush) before_flush();
    recorder_.write(false, "running: written after " + steps_done(step), false);
    since_flush_.reset();
  }
}

bool Run::flush_due(long step) {
  if (step + 1 == deck_.run.steps) return false;  // the final write follows
  const auto& out = deck_.output;
  if (out.flush_every > 0 && (step + 1) % out.flush_every == 0) return true;
  if (out.flush_seconds <= 0) return false;
  if (step == 0) return true;
  char due = root_ && since_flush_.seconds() >= out.flush_seconds;
  if (nranks_ > 1) MPI_Bcast(&due, 1, MPI_CHAR, 0, comm_);  // rank 0's clock decides for every rank
  return due != 0;
}

namespace {
// 600 -> "10 min", 90 -> "90 s", 0.5 -> "0.5 s".
std::string duration_text(double seconds) {
  char text[32];
  if (seconds >= 60 && std::fmod(seconds, 60.0) == 0)
    std::snprintf(text, sizeof text, "%.0f min", seconds / 60);
  else
    std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}
}  // namespace

std::string Run::flush_policy() const {
  const auto& out = deck_.output;
  std::string when;
  if (out.flush_seconds > 0) when = "every " + duration_text(out.flush_seconds) + " of run time and after step 1";
  if (out.flush_every > 0)
    when += (when.empty() ? "" : ", and ") + std::string("every ") + std::to_string(out.flush_every) + " steps";
  if (when.empty()) return "metrics written at the end only (output.flush_seconds: 0, output.flush_every: 0)";
  return "metrics flushed " + when;
}

std::string Run::steps_done(long step) const {
  return "step " + std::to_string(step + 1) + " of " + std::to_string(deck_.run.steps);
}

// What the metrics file holds besides the steps (collective): the parts' facts, this
// rank's part of the run's prediction (at the alpha the last step used), the peak and the energy.
void Run::record() {
  RunFacts facts = facts_();
  if (facts.options.offload.alpha != rank_alpha_ || facts.host_alpha != rank_host_alpha_) {
    rank_ = rank_at_alpha(deck_, prediction_.plan, par_.sp_rank(), facts.options, facts.host_alpha);
    rank_alpha_ = facts.options.offload.alpha;
    rank_host_alpha_ = facts.host_alpha;
  }
  facts.predicted = rank_;
  recorder_.record([&](RunMetrics& m) {
    m.peak_gflops = peak_.gflops;
    m.nominal_peak_gflops = peak_.nominal.gflops;
    m.mfu_peak_gflops = peak_.mfu.gflops;
    m.attributes.text["peak_source"] = peak_.source;
    m.attributes.text["mfu_peak_kind"] = peak_.mfu.kind;
    m.attributes.text["mfu_peak_source"] = peak_.mfu.source;
    if (load_.known) {
      m.attributes.text["node_load"] = load_.text();
      m.attributes.reals["node_load_other_cores"] = load_.other_cores;
      m.attributes.reals["node_load_steal_fraction"] = load_.steal_fraction;
      m.attributes.reals["node_load_average"] = load_.load_average;
      m.attributes.integers["node_load_cores"] = load_.cores;
      m.attributes.integers["node_load_cores_used"] = load_.cores_used;
    }
    m.rules.node_load = load_.excess();
    if (!peak_.nominal.device.empty()) m.attributes.text["device_name"] = peak_.nominal.device;
    m.energy_source = energy_.source();
    m.energy_note = energy_.note();
    m.attributes.merge(energy_facts_);
    record_run(m, deck_, par_, facts);
  });
}

int Run::finish(const std::string& stop_reason) {
  energy_facts_ = energy_.attributes(root_);  // rank 0 asks Slurm (sstat) where it runs in a job step
  if (measuring_) load_ = node_load_since(measure_start_, host_threads_per_rank(), comm_);
  if (root_ && load_.known) std::printf("node load over the measured steps: %s\n", load_.text().c_str());
  record();
  StepArena::instance().reset();  // every step buffer is gone; the arena goes before Kokkos does
  protect_results_write(true);   // no signal abandons the final write
  const auto summary = recorder_.write(stop_reason.empty(), stop_reason);
  protect_results_write(false);
  if (!root_) return 0;  // the verdict is rank 0's, shared by run_deck
  print_summary(summary, recorder_.path());
  const int code = print_result(summary, recorder_.metrics(), deck_, nranks_, recorder_.path());
  mllog_result(stop_reason.empty(), summary.valid, summary.fom, summary.reportable,
               summary.energy_known ? nlohmann::json(summary.tokens_per_joule) : nlohmann::json());
  std::fflush(stdout);
  return code;
}

int host_threads_per_rank() {
  const ThreadCounts t = thread_counts();
  const bool host = t.kokkos_space == "Serial" || t.kokkos_space == "OpenMP" || t.kokkos_space == "Threads";
  return std::max(host ? t.kokkos : 1, t.blas);
}

MfuPeak choose_mfu_peak(const PeakRate& peak, const PredictedTime& machine, const KernelChoice& kernels,
                        Precision precision, bool node_quiet, MPI_Comm comm) {
  char rate[48];
  if (peak.nominal.gflops > 0) {
    std::snprintf(rate, sizeof rate, "%.0f GFLOP/s", peak.nominal.gflops);
    return {peak.nominal.gflops, "datasheet", peak.nominal.device + " datasheet, dense " + name_of(precision) + ": " + rate};
  }
  if (machine.known() && machine.time.mfu_peak_gflops > 0) {
    std::snprintf(rate, sizeof rate, "%.1f GFLOP/s", machine.time.mfu_peak_gflops);
    return {machine.time.mfu_peak_gflops, "machine", "machine file " + machine.machine + " (" + machine.kind + ", " +
                                                         machine.file + ", digest " + machine.digest + "): " + rate};
  }
  const GemmPath path = precision == Precision::bf16 ? kernels.gemm_bf16 : kernels.gemm_fp32;
  const std::string key = host_peak_key(name_of(precision), name_of(path), host_threads_per_rank(), node_ranks(comm).size);
  return host_mfu_peak(peak.gflops, key, node_quiet, comm);
}

}  // namespace minilst
