// The step loop, read top to bottom: refuse what cannot run, create the outputs,
// build the model's parts (Training), then for every step: the gradient of this
// rank's tokens, the reduction over the ranks that share the weights, the optimizer,
// and the two after_step calls: the results' (results/run.hpp: records, progress line,
// snapshots) and the job's (job/step_guard.hpp: watchdog, stop signals, time budgets).
// Finally the metrics file, the summary and RESULT.
#include "app/driver.hpp"

#include <Kokkos_Core.hpp>

#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "app/run_prediction.hpp"
#include "app/training.hpp"
#include "attention/strategy_factory.hpp"
#include "core/kernel_choice.hpp"
#include "io/h5.hpp"
#include "io/output_claim.hpp"
#include "io/tensor_dump.hpp"
#include "job/agreement.hpp"
#include "job/node_resources.hpp"
#include "job/step_guard.hpp"
#include "memory/offload_controller.hpp"
#include "memory/step_arena.hpp"
#include "model/trainer.hpp"
#include "parallel/broadcast.hpp"
#include "results/json_summary.hpp"
#include "results/mllog.hpp"
#include "results/provenance.hpp"
#include "results/run.hpp"

namespace minilst {

namespace {

template <class T>
int run_typed(const Deck& deck, const RunContext& ctx, MetricsRecorder& recorder, const Prediction& prediction) {
  const bool root = ctx.rank == 0;
  // The kernels every rank runs (rank 0's probes, broadcast); the peak MFU is measured against; the time budget.
  const double run_flops = recorder.metrics().flops_per_step * double(deck.run.steps) / ctx.nranks;
  const ResolvedKernels kernels =
      agree_on_kernels(deck.options.kernels, deck.run.precision, deck.model.head_dim(), ctx.comm, run_flops);
  const CpuSample before_peak = sample_cpu();  // a busy node's rate is not stored as the host's peak
  PeakRate peak = measure_peak<T>(kernels.choice, deck.run.precision, ctx.comm);
  const NodeLoad peak_load = node_load_since(before_peak, host_threads_per_rank(), ctx.comm, 0.3);  // unknown: quiet
  peak.mfu = choose_mfu_peak(peak, prediction.time, kernels.choice, deck.run.precision, peak_load.excess().empty(), ctx.comm);
  StepGuard guard(deck, ctx.comm, ctx.rank, ctx.nranks, *ctx.watchdog, recorder.metrics().flops_per_step / ctx.nranks);
  PhaseTimers timers;
  Training<T> t(deck, ctx.comm, kernels.choice, double(prediction.states.at("host_optimizer")), timers);
  if (!t.offload.error().empty()) {  // before anything is allocated; the same verdict on every rank
    if (root) std::fprintf(stderr, "error: deck: %s\n", t.offload.error().c_str());
    return 2;
  }
  Run run(deck, ctx.comm, ctx.rank, recorder, peak, t.par, [&] { return t.facts(kernels, ctx); }, timers, prediction);
  run.print_setup(t.opts, kernels, t.geometry, t.offload.active() ? t.offload.describe(t.trainer.activations()) : "");
  if (root) ctx.watchdog->set_rescue([&](const std::string& why) { recorder.rescue(why); });  // a stuck peer
  guard.start();
  StepArena::instance().configure(deck.memory.plan, deck.memory.solver);  // train_step records the first step, then replays
  const int D = t.par.dp_size();

  std::string stop_reason;
  for (long step = 0; step < deck.run.steps && stop_reason.empty(); ++step) {
    const compat::ScopedRegion step_region("step");  // what Kokkos Tools show as the step
    run.begin_step();
    StepResult r = train_step(t, deck, step, timers, ctx.comm, root, [&](StepResult& s) {
      if (step == 0 && !deck.output.dump.empty()) s.dump_seconds = dump_first_step(deck, t.trainer, D, s.loss, root, recorder);
    });
    run.after_step(step, std::move(r), [&] { guard.arm_write("a flush of the metrics file"); });
    if (const auto stop = guard.after_step(step, run.last_step_seconds()); !stop.empty()) {
      stop_reason = stop + ": stopped after " + run.steps_done(step);
      if (root) std::printf("stopping: %s\n", stop_reason.c_str());
    }
  }
  guard.arm_final_write();
  return run.finish(stop_reason);
}

// The outputs, created, probed and claimed (io/output_claim.hpp: locked, the files the run may
// replace approved) by rank 0 before the first step (not after the last); "" when fine.
std::string prepare_outputs(const Deck& deck, const std::string& path, OutputClaim& claim) {
  if (const auto problem = claim.check(deck, path); !problem.empty()) return problem;
  const std::tuple<const char*, std::string, const char*> outputs[] = {
      {"output.metrics", path, "metrics"}, {"output.dump", deck.output.dump, "tensor-dump"}};
  for (const auto& [key, file, kind] : outputs) {
    if (file.empty()) continue;
    if (const auto problem = h5::prepare_output(file, std::string("minilst-") + kind, deck.output.overwrite);
        !problem.empty())
      return key + std::string(": ") + problem;
  }
  if (const auto problem = json_summary_problem(path, deck.output.overwrite); !problem.empty())
    return "output.metrics: " + problem;
  return claim.take(deck, path);
}

// Why the run cannot start (the same verdict on every rank, before any work), or "": the run's one
// prediction made on the way (predict/prediction.hpp: the memory fit is its plan's).
std::string refuse(const Deck& deck, const RunContext& ctx, Prediction& prediction) {
  // srun started several tasks but MPI sees one: the PMI wiring is wrong and every
  // task would run alone (a silent singleton); refuse rather than mislead.
  const char* step_tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  if (ctx.nranks == 1 && step_tasks && std::atoi(step_tasks) > 1)
    return std::string("srun started ") + step_tasks + " tasks but MPI sees 1 rank: check srun --mpi=pmix (or your "
           "site's PMI) so that the tasks form one MPI job";
  const auto parallel = check_parallel(deck.model, deck.parallel, deck.run.seq_len, ctx.nranks);
  if (!parallel.empty()) return "deck: " + parallel;
  if (const auto zero = check_zero(deck.parallel, ctx.nranks, deck.memory.optimizer_offload); !zero.empty()) return "deck: " + zero;
  if (const auto kernels = kernel_choice_refusal(deck.options.kernels, deck.run.precision, deck.model.head_dim());
      !kernels.empty())
    return "deck: " + kernels;
  return predict_for_run(deck, ctx.nranks, available_memory(ctx.comm), prediction);
}

// run.machine: every rank reads the machine file (as it reads the deck) and prices the run's plan
// on it; one rank's failure stops every rank (rank 0 names it, else the rank that failed), before
// any output is created. True when the run goes on (with prediction.time filled, or no machine).
bool agree_on_prediction(const Deck& deck, const RunContext& ctx, Prediction& prediction) {
  if (deck.run.machine.empty()) return true;
  std::vector<std::string> warnings;
  if (deck.run.machine == kMachineProbeAtStart && ctx.rank == 0)
    std::printf("run.machine: probe: measuring this job's ranks first (about 30-60 s)\n"), std::fflush(stdout);
  const std::string why = price_run(deck, ctx.comm, prediction, warnings);
  int failed[2] = {!why.empty(), !why.empty()};  // {this rank, rank 0}
  MPI_Bcast(&failed[1], 1, MPI_INT, 0, ctx.comm);
  int any = 0;
  MPI_Allreduce(&failed[0], &any, 1, MPI_INT, MPI_MAX, ctx.comm);
  if (failed[0] && (ctx.rank == 0 || !failed[1]))
    std::fprintf(stderr, "error%s: %s\n", ctx.rank == 0 ? "" : (" (rank " + std::to_string(ctx.rank) + ")").c_str(),
                 why.c_str());
  if (any) return false;
  if (ctx.rank == 0)
    for (const auto& w : warnings)
      std::fprintf(stderr, "warning: run.machine: %s flags an implausible figure: %s\n", deck.run.machine.c_str(),
                   w.c_str());
  return true;
}

}  // namespace

int run_deck(const Deck& deck, const RunContext& ctx) {
  const int P = deck.parallel.sequence_parallel();
  Prediction prediction;  // the run's one: memory, communication, FLOPs, and time on run.machine
  if (const auto why = refuse(deck, ctx, prediction); !why.empty()) {
    if (ctx.rank == 0) std::fprintf(stderr, "error: %s\n", why.c_str());
    return 2;
  }
  // The communicators, NCCL, the model: the first step's patience.
  ctx.watchdog->arm(StepGuard::first_patience(deck, ctx.nranks, prediction.plan.flops_per_step / ctx.nranks), "the set-up");
  if (!agree_on_prediction(deck, ctx, prediction)) return 2;
  RunMetrics metrics = start_run_metrics(deck, std::max(1, ctx.nranks / (P * deck.parallel.tensor)), P, prediction);
  std::string path, output_error;
  OutputClaim claim;  // rank 0's: held until the final write is done
  if (ctx.rank == 0) {
    path = metrics_path(deck, ctx.nranks);
    output_error = prepare_outputs(deck, path, claim);
  }
  int output_ok = output_error.empty();
  MPI_Bcast(&output_ok, 1, MPI_INT, 0, ctx.comm);
  if (!output_ok) {
    if (ctx.rank == 0) std::fprintf(stderr, "error: %s\n", output_error.c_str());
    return 2;
  }
  path = broadcast_string(path, ctx.comm);  // every rank can write the finished steps (a rescue)
  if (ctx.rank == 0) {
    mllog("init_start", nullptr, {}, MllogEvent::interval_start);
    mllog("submission_benchmark", "minilst");
    mllog("seq_len", deck.run.seq_len);
    std::printf("%s\ndeck: %s\nresolved configuration:\n%s\n", version_string().c_str(), deck.path.c_str(),
                deck.resolved_yaml.c_str());
    if (const auto& p = metrics.prediction; p.known())
      std::printf("prediction: step %.4g s on %s (%s machine file %s, digest %s); the summary sets it beside the "
                  "measured step\n", p.time.step_s, p.machine.c_str(), p.kind.c_str(), p.file.c_str(),
                  p.digest.c_str());
    std::fflush(stdout);
  }
  compat::declare_metadata("deck", deck.path);
  compat::declare_metadata("precision", name_of(deck.run.precision));
  MetricsRecorder recorder(ctx.comm, std::move(metrics), path);
  int code = 1;
  try {
    switch (deck.run.precision) {
      case Precision::float32: code = run_typed<float>(deck, ctx, recorder, prediction); break;
      case Precision::float64: code = run_typed<double>(deck, ctx, recorder, prediction); break;
      case Precision::bf16: code = run_typed<bf16>(deck, ctx, recorder, prediction); break;
    }
  } catch (const std::exception& e) {  // this rank alone: it writes the finished steps, main ends the job
    ctx.watchdog->set_rescue({});
    ctx.watchdog->arm(Watchdog::kRescueSeconds, "this rank's finished steps to be written");
    StepArena::instance().reset();  // its buffers go before Kokkos does
    recorder.rescue("error on rank " + std::to_string(ctx.rank) + ": " + e.what());
    throw;
  }
  MPI_Bcast(&code, 1, MPI_INT, 0, ctx.comm);  // every rank exits with rank 0's verdict
  ctx.watchdog->finishing(code);  // a peer that never arrives at MPI_Finalize costs only the patience
  return code;
}

}  // namespace minilst
