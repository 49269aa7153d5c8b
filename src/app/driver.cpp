// The step loop, read top to bottom: refuse what cannot run, set up the parallel
// world, the model and the offload controller, then for every step: the gradient of
// this rank's tokens, the all-reduce, the optimizer, a progress line, and the
// checks that stop a run early; finally the metrics file, the summary and RESULT.
#include "app/driver.hpp"

#include <Kokkos_Core.hpp>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <tuple>
#include <type_traits>

#include "job/energy_meter.hpp"
#include "job/machine.hpp"
#include "app/plan.hpp"
#include "results/report.hpp"
#include "job/stop.hpp"
#include "job/watchdog.hpp"
#include "attention/strategy_factory.hpp"
#include "core/attention_kernel.hpp"
#include "io/h5.hpp"
#include "results/json_summary.hpp"
#include "results/mllog.hpp"
#include "results/provenance.hpp"
#include "results/metrics_recorder.hpp"
#include "results/run_record.hpp"
#include "io/tensor_dump.hpp"
#include "kernels/bf16.hpp"
#include "kernels/gemm_bf16_dot.hpp"
#include "kernels/gemm_rate.hpp"
#include "memory/offload_controller.hpp"
#include "memory/step_arena.hpp"
#include "model/memory_model.hpp"
#include "model/step_reduce.hpp"
#include "model/trainer.hpp"
#include "parallel/broadcast.hpp"

namespace minilst {

namespace {

// The global sequences of a data-parallel replica's micro-steps (replica-major numbering).
std::vector<Batch> batches_of(const Deck& deck, long step, int replica) {
  std::vector<Batch> out;
  for (int m = 0; m < deck.run.grad_accum; ++m)
    out.push_back(synthetic_batch(deck.model.vocab, deck.run.seq_len, deck.run.seed, step,
                                  replica * deck.run.grad_accum + m));
  return out;
}

TrainOptions train_options(const RunConfig& run) {
  TrainOptions t;
  t.seed = run.seed;
  t.init_std = run.init_std;
  t.norm_init_noise = run.norm_init_noise;
  t.adamw.lr = run.learning_rate;
  t.adamw.weight_decay = run.weight_decay;
  return t;
}

// Step 1's tensor dump (rank 0 regenerates every rank's sequences from the seed); its
// seconds. Collective: every rank gives its shards of the weights and gradients.
template <class T>
double dump_first_step(const Deck& deck, Trainer<T>& trainer, int replicas, double loss, bool root,
                       MetricsRecorder& recorder) {
  Kokkos::Timer timer;
  auto weights = trainer.states().gathered_weights();  // the fp32 master and gradients under bf16
  auto grads = trainer.states().gathered_gradients();
  if (!root) return timer.seconds();
  const auto lock = recorder.hold();  // HDF5 is the rescue's too
  std::vector<Batch> all;
  for (int d = 0; d < replicas; ++d)
    for (auto& b : batches_of(deck, 0, d)) all.push_back(std::move(b));
  write_tensor_dump(deck.output.dump, deck.model, deck.run.seq_len, deck.resolved_yaml, all, loss, std::move(weights),
                    std::move(grads));
  std::printf("tensor dump: %s\n", deck.output.dump.c_str());
  return timer.seconds();
}

std::string steps_done(long step, const Deck& deck) {
  return "step " + std::to_string(step + 1) + " of " + std::to_string(deck.run.steps);
}

// The watchdog's patience for the next step: run.watchdog_s, or automatic (none on one rank: no peer to wait for).
double next_patience(const Deck& deck, const RunContext& ctx, const RunMetrics& m, double slowest_step) {
  if (deck.run.watchdog_s > 0) return deck.run.watchdog_s;
  if (ctx.nranks == 1) return 0;
  return slowest_step > 0 ? Watchdog::step_patience(slowest_step)
                          : Watchdog::first_step_patience(m.flops_per_step / ctx.nranks);
}

template <class T>
int run_typed(const Deck& deck, const RunContext& ctx, MetricsRecorder& recorder) {
  const bool root = ctx.rank == 0;
  if constexpr (std::is_same<T, bf16>::value)  // one GEMM path on every rank: rank 0's measured choice
    kernels::adopt_bf16_gemm_path(broadcast_string(kernels::bf16_gemm_choice().path, ctx.comm));
  // MFU's denominator: the run's dense GEMM rate on each rank, measured now (mean over ranks; before
  // the time budget starts), and the device's datasheet peak where it is known.
#ifdef KOKKOS_ENABLE_CUDA
  constexpr int kPeakGemmSize = 4096;  // a device needs large products to reach its rate
#else
  constexpr int kPeakGemmSize = sizeof(T) == 8 ? 512 : 1024;  // double: the small exactness runs
#endif
  double peak = kernels::measured_gemm_gflops<T>(kPeakGemmSize, 2);
  MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_DOUBLE, MPI_SUM, ctx.comm);
  peak /= ctx.nranks;
  const NominalPeak nominal = nominal_peak(deck.run.precision);
  StopControl stopper(deck.run.time_limit_s, ctx.rank);
  ParallelSetup par(ctx.comm, deck.parallel, deck.run.seq_len);
  const auto geometry = attention_geometry(deck.model, deck.parallel, par.layout(), par.sp_rank());
  ModelOptions opts = resolve_chunks(deck, deck.model, geometry.local_rows, sizeof(T));
  // Optimizer offload's states come out of the host budget first (check_fits saw that they fit).
  const double host_states = double(
      predict_model_states(deck.model, zero_options(deck, ctx.nranks), deck.run.precision).at("host_optimizer"));
  const OffloadSettings settings{deck.memory.alpha_auto, host_budget_bytes(deck.memory, ctx.comm) - host_states,
                                 deck.memory.host_budget_auto};
  const SavedLayout saved = geometry.saved_layout();
  OffloadController<T> offload(opts, deck.model.layers,
                               activation_shapes(deck.model, geometry.local_rows, geometry.stats_shape(), saved), settings,
                               ctx.comm);
  if (!offload.error().empty()) {  // before anything is allocated; the same verdict on every rank
    if (root) std::fprintf(stderr, "error: deck: %s\n", offload.error().c_str());
    return 2;
  }
  PhaseTimers timers;
  Trainer<T> trainer(deck.model, opts, train_options(deck.run), par.local_positions(), &timers,
                     make_attention_factory<T>(geometry, par, opts.kernels, &timers),
                     zero_options(deck, ctx.nranks), &par.world());
  const int D = par.dp_size();
  EnergyMeter energy(ctx.comm);  // collective: who reads which counter, the same verdict everywhere
  RunAttributes energy_facts = energy.attributes(false);  // the GPU driver; Slurm's energy at the end
  if (root) {
    print_setup(deck, opts, geometry, ctx.nranks, D, sizeof(T),
                offload.active() ? offload.describe(trainer.activations()) : "");
    std::printf("peak for MFU: %s GEMM %d^3 at %.1f GFLOP/s per rank (measured, mean over ranks)", name_of(deck.run.precision).c_str(),
                kPeakGemmSize, peak);
    if (nominal.gflops > 0) std::printf("; %s datasheet %.0f GFLOP/s", nominal.device.c_str(), nominal.gflops);
    std::printf("\nenergy: %s (%s)\n", energy.source().c_str(), energy.note().c_str());
    mllog("init_stop", nullptr, {}, MllogEvent::interval_end);
    mllog("run_start", nullptr, {}, MllogEvent::interval_start);
  }
  const auto record = [&] {  // what the metrics file holds besides the steps (collective)
    ModelOptions now = opts;
    now.offload.alpha = trainer.activations().alpha();
    recorder.record([&](RunMetrics& m) {
      m.peak_gflops = peak;
      m.nominal_peak_gflops = nominal.gflops;
      m.attributes.text["peak_source"] = "measured: " + name_of(deck.run.precision) + " GEMM " +
                                         std::to_string(kPeakGemmSize) + "^3 (kernels::gemm), mean over ranks";
      if (!nominal.device.empty()) m.attributes.text["device_name"] = nominal.device;
      m.energy_source = energy.source();
      m.energy_note = energy.note();
      m.attributes.merge(energy_facts);
      record_run(m, deck, par, {geometry, now, offload.largest_alpha(), offload.attributes(trainer.activations()),
                                ctx.argc, ctx.argv});
    });
  };
  // A stuck peer: rank 0's watchdog writes the finished steps before it ends the rank.
  if (root) ctx.watchdog->set_rescue([&](const std::string& why) { recorder.rescue(why); });
  ctx.watchdog->arm(next_patience(deck, ctx, recorder.metrics(), 0), "step 1");
  auto& arena = StepArena::instance();  // the first step is recorded and planned; later ones run in the arena
  arena.configure(deck.memory.plan, deck.memory.solver);

  std::string stop_reason;
  double slowest = 0;
  for (long step = 0; step < deck.run.steps; ++step) {
    const compat::ScopedRegion step_region("step");  // what Kokkos Tools show as the step
    timers.clear();
    energy.joules_since_last();  // the step's energy starts here
    Kokkos::Timer wall;
    arena.begin_step();
    double loss = trainer.compute_gradients(par.shard(batches_of(deck, step, par.dp_index())), 1.0 / D);
    arena.end_step();
    const auto moved = trainer.activations().take_counters();  // every copy of the step is complete
    timers.add(Phase::copy_engine_busy, moved.busy_seconds);
    if (step == 0) offload.after_first_step(trainer.activations(), moved, ctx.comm, root);
    loss = reduce_step(trainer, par, loss, &timers);  // every rank shares the weights: the step's gradient
    const double gnorm = trainer.grad_norm();
    auto sent = par.take_comm_bytes();
    const double dump_seconds =
        step == 0 && !deck.output.dump.empty() ? dump_first_step(deck, trainer, D, loss, root, recorder) : 0.0;
    par.take_comm_bytes();  // the dump's gathers are not the step's
    trainer.apply_optimizer();
    compat::fence("end of step");
    timers.add(Phase::step, wall.seconds() - dump_seconds);
    const double joules = energy.joules_since_last();
    for (const auto& [op, bytes] : par.take_comm_bytes()) sent[op] += bytes;  // ZeRO 1, 2: the weights' gathers
    recorder.add_step({loss, gnorm, timers.by_name(), std::move(sent),
                       {{"to_host", moved.bytes_to_host}, {"to_device", moved.bytes_to_device}},
                       arena.allocations_in_step(), joules});
    if (step == 0) record();  // what a rescue writes besides the steps
    if (root) {
      print_step(step, deck, loss, gnorm, timers.get(Phase::step), recorder.metrics().tokens_per_step);
      mllog("train_loss", loss, {{"step_num", step + 1}, {"step_seconds", timers.get(Phase::step)}});
    }
    slowest = std::max(slowest, timers.get(Phase::step));
    ctx.watchdog->arm(next_patience(deck, ctx, recorder.metrics(), slowest), "step " + std::to_string(step + 2));

    const bool last = step + 1 == deck.run.steps;
    const std::string stop = stopper.after_step(ctx.comm, ctx.nranks, timers.get(Phase::step));  // same on every rank
    if (!stop.empty() && !last) {
      stop_reason = stop + ": stopped after " + steps_done(step, deck);
      if (root) std::printf("stopping: %s\n", stop_reason.c_str());
      break;
    }
    if (deck.output.flush_every > 0 && (step + 1) % deck.output.flush_every == 0 && !last)
      recorder.write(false, "running: written after " + steps_done(step, deck), false);
  }

  ctx.watchdog->arm(next_patience(deck, ctx, recorder.metrics(), slowest), "the final write");
  energy_facts = energy.attributes(root);  // rank 0 asks Slurm (sstat) where it runs in a job step
  record();
  arena.reset();  // every step buffer is gone; the arena goes before Kokkos does
  protect_results_write(true);  // no signal abandons the final write
  const auto summary = recorder.write(stop_reason.empty(), stop_reason);
  protect_results_write(false);
  if (!root) return 0;  // the verdict is rank 0's, shared by run_deck
  print_summary(summary, recorder.path());
  const int code = print_result(summary, recorder.metrics(), deck, ctx.nranks, recorder.path());
  mllog("minilst_result", {{"verdict", code == 0 ? "VALID" : code == 3 ? "INVALID" : "INCOMPLETE"},
                           {"fom", summary.fom},
                           {"fom_unit", "tokens/s per rank"},
                           {"reportable", summary.reportable.yes()},
                           {"reportable_reasons", summary.reportable.reasons},
                           {"tokens_per_joule", summary.energy_known ? nlohmann::json(summary.tokens_per_joule) : nlohmann::json()}});
  mllog("run_stop", nullptr, {{"status", code == 0 ? "success" : "aborted"}}, MllogEvent::interval_end);
  std::fflush(stdout);
  return code;
}

// The outputs, created and probed by rank 0 before the first step (not after the last); "" when fine.
std::string prepare_outputs(const Deck& deck, const std::string& path) {
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
  return "";
}

// Why the run cannot start (the same verdict on every rank, before any work), or "".
std::string refuse(const Deck& deck, const RunContext& ctx) {
  // srun started several tasks but MPI sees one: the PMI wiring is wrong and every
  // task would run alone (a silent singleton); refuse rather than mislead.
  const char* step_tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  if (ctx.nranks == 1 && step_tasks && std::atoi(step_tasks) > 1)
    return std::string("srun started ") + step_tasks + " tasks but MPI sees 1 rank: check srun --mpi=pmix (or your "
           "site's PMI) so that the tasks form one MPI job";
  const auto parallel = check_parallel(deck.model, deck.parallel, deck.run.seq_len, ctx.nranks);
  if (!parallel.empty()) return "deck: " + parallel;
  if (const auto zero = check_zero(deck.parallel, ctx.nranks, deck.memory.optimizer_offload); !zero.empty()) return "deck: " + zero;
  if (const auto attention = attention_kernel_refusal(deck.model, deck.run.precision, deck.options.attention_kernel);
      !attention.empty())
    return "deck: " + attention;
  return check_fits(deck, ctx.nranks, available_memory(ctx.comm));
}

}  // namespace

int run_deck(const Deck& deck, const RunContext& ctx) {
  const int P = deck.parallel.sequence_parallel();
  RunMetrics metrics = start_run_metrics(deck, std::max(1, ctx.nranks / P), P);
  ctx.watchdog->arm(next_patience(deck, ctx, metrics, 0), "the set-up");  // the communicators, NCCL, the model
  if (const auto why = refuse(deck, ctx); !why.empty()) {
    if (ctx.rank == 0) std::fprintf(stderr, "error: %s\n", why.c_str());
    return 2;
  }
  std::string path, output_error;
  if (ctx.rank == 0) {
    path = metrics_path(deck, ctx.nranks);
    output_error = prepare_outputs(deck, path);
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
    std::fflush(stdout);
  }
  kernels::attention_kernel_setting() = deck.options.attention_kernel;  // before anything records or runs it
  compat::declare_metadata("deck", deck.path);
  compat::declare_metadata("precision", name_of(deck.run.precision));
  MetricsRecorder recorder(ctx.comm, std::move(metrics), path);
  int code = 1;
  try {
    switch (deck.run.precision) {
      case Precision::float32: code = run_typed<float>(deck, ctx, recorder); break;
      case Precision::float64: code = run_typed<double>(deck, ctx, recorder); break;
      case Precision::bf16: code = run_typed<bf16>(deck, ctx, recorder); break;
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
