// What a run reports, around its step loop: the peak rate MFU is measured against
// (measured once, before the first step), the energy meter, every step's records (the
// metrics recorder, the progress line, the MLPerf-style line, the flushes: a snapshot
// after step 1 and every output.flush_seconds of rank 0's clock, every
// output.flush_every steps), what the metrics file holds besides the steps (this rank's part
// of the run's one prediction, predict/prediction.hpp; re-modelled only where alpha auto chose
// another alpha), and the end: the final write, the summary and the RESULT line.
//   Run run(...);  run.print_setup(...);
//   for each step: run.begin_step(); ... the step ...; run.after_step(step, result);
//   return run.finish(stop_reason);
#pragma once

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <functional>
#include <map>
#include <string>

#include "attention/attention_geometry.hpp"
#include "core/kernel_choice.hpp"
#include "core/phases.hpp"
#include "io/deck.hpp"
#include "job/energy_meter.hpp"
#include "job/node_load.hpp"
#include "job/node_resources.hpp"
#include "kernels/gemm_rate.hpp"
#include "memory/copy_engine.hpp"
#include "predict/prediction.hpp"
#include "parallel/parallel_setup.hpp"
#include "results/gemm_peak.hpp"
#include "results/mfu_peak.hpp"
#include "results/metrics_recorder.hpp"
#include "results/run_record.hpp"

namespace minilst {

// The run's dense GEMM rate on each rank (mean over ranks; the best of several shapes,
// results/gemm_peak.hpp), the device's datasheet peak where it is known, and MFU's fixed peak.
struct PeakRate {
  double gflops = 0;   // measured, per rank
  std::string shape;   // the product that gave rank 0's best, m x n x k
  std::string source;  // how it was measured (the metrics' peak_source)
  NominalPeak nominal;
  MfuPeak mfu;         // what MFU divides by (choose_mfu_peak)
};

// Collective: MFU's fixed peak (results/mfu_peak.hpp): the datasheet's, the machine file's
// (run --machine), else this host's stored peak; `node_quiet`: the node was not busy while
// `peak` was measured (a busy node's rate is not stored).
MfuPeak choose_mfu_peak(const PeakRate& peak, const PredictedTime& machine, const KernelChoice& kernels,
                        Precision precision, bool node_quiet, MPI_Comm comm);

// Threads one rank computes with on the host (Kokkos' host space and the BLAS; 1 for a device's ranks).
int host_threads_per_rank();

// Collective: the rate of the run's precision T through the run's GEMM path.
template <class T>
PeakRate measure_peak(const KernelChoice& kernels, Precision precision, MPI_Comm comm) {
  const GemmPeak best = measure_gemm_peak<T>(kernels, name_of(precision), comm);
  return {best.gflops, best.best.text(), best.source, nominal_peak(precision)};
}

// One step as the loop saw it.
struct StepResult {
  double loss = 0, grad_norm = 0;
  CommBytes comm_bytes{};                           // operation -> bytes this rank sent
  CopyEngine::Counters moved;                       // what the copy engine moved in the step
  double dump_seconds = 0;                          // the tensor dump's (not the step's)
};

class Run {
 public:
  // What the run's parts say of themselves when recorded (collective): the geometry, the
  // options with the offload alpha the last step used, the kernels, the offload's facts.
  using FactsSource = std::function<RunFacts()>;

  // Collective (the energy meter's agreement). timers: the step's phase timers (the
  // model's parts add to them); prediction: the run's one prediction (predict/prediction.hpp).
  Run(const Deck& deck, MPI_Comm comm, int rank, MetricsRecorder& recorder, PeakRate peak, ParallelSetup& par,
      FactsSource facts, PhaseTimers& timers, const Prediction& prediction);

  // Rank 0: the set-up lines (model, kernels, layout, chunks, offload, states, peak, energy) and
  // the first MLPerf-style lines.
  void print_setup(const ModelOptions& opts, const ResolvedKernels& kernels, const AttentionGeometry& g,
                   const std::string& offload) const;

  void begin_step();
  // Collective: the step's records (step 0 also records the facts, for a rescue), the
  // progress line, and a snapshot when one is due (flush_due) except after the last step,
  // `before_flush` called first (the job's watchdog gives a write its own patience).
  void after_step(long step, StepResult result, const std::function<void()>& before_flush = {});
  double last_step_seconds() const { return timers_.get(Phase::step); }
  // "step N of M" for messages.
  std::string steps_done(long step) const;

  // Collective: the final record and write (no signal abandons it), then on rank 0 the
  // summary and the RESULT line. The exit code: rank 0's verdict (0 VALID, 3, 4), 0 elsewhere.
  int finish(const std::string& stop_reason);

 private:
  void record();
  // Collective: whether the metrics are flushed after this step, the same verdict on every
  // rank: after step 1 and once output.flush_seconds passed on rank 0's clock since the last
  // write (one byte broadcast from rank 0), every output.flush_every steps; never after the last.
  bool flush_due(long step);
  // "metrics flushed every 10 min of run time and after step 1" (rank 0's start line).
  std::string flush_policy() const;

  const Deck& deck_;
  MPI_Comm comm_;
  bool root_;
  int nranks_;
  MetricsRecorder& recorder_;
  PeakRate peak_;
  ParallelSetup& par_;
  FactsSource facts_;
  PhaseTimers& timers_;
  EnergyMeter energy_;
  RunAttributes energy_facts_;
  const Prediction& prediction_;
  double rank_alpha_ = -1, rank_host_alpha_ = -1;  // the alphas of rank_ (-1: none yet)
  RankPrediction rank_;                            // this rank's part of the prediction at them
  Kokkos::Timer wall_;
  Kokkos::Timer since_flush_;  // rank 0's clock since the run's start or its last flush
  Kokkos::Timer run_clock_;    // since the first step began (the step line's elapsed time)
  bool started_ = false;
  double warmup_seconds_ = 0, measured_seconds_ = 0;  // the steps' times so far (the ETA's mean)
  long steps_begun_ = 0;
  CpuSample measure_start_;  // the node's CPU ticks as the first measured step began
  bool measuring_ = false;   // a measured step began (the same on every rank)
  NodeLoad load_;            // the node's load over the measured steps (finish)
};

}  // namespace minilst
