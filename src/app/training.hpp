// The model side of a run on this rank, built before the first step (Training: the
// layout, the options with the run's kernels, the offload controller, the trainer),
// the step's data (batches_of: each replica's synthetic sequences) and the first
// step's tensor dump. The driver (app/driver.cpp) runs the steps.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdio>
#include <functional>
#include <vector>

#include "app/run_context.hpp"
#include "predict/deck_plan.hpp"
#include "attention/strategy_factory.hpp"
#include "core/kernel_choice.hpp"
#include "io/tensor_dump.hpp"
#include "job/node_resources.hpp"
#include "memory/offload_controller.hpp"
#include "memory/step_arena.hpp"
#include "model/data.hpp"
#include "model/step_reduce.hpp"
#include "model/trainer.hpp"
#include "parallel/parallel_setup.hpp"
#include "results/metrics_recorder.hpp"
#include "results/run.hpp"
#include "results/run_record.hpp"

namespace minilst {

// The global sequences of a data-parallel replica's micro-steps (replica-major numbering).
inline std::vector<Batch> batches_of(const Deck& deck, long step, int replica) {
  std::vector<Batch> out;
  for (int m = 0; m < deck.run.grad_accum; ++m)
    out.push_back(synthetic_batch(deck.model.vocab, deck.run.seq_len, deck.run.seed, step,
                                  replica * deck.run.grad_accum + m, deck.options.mask.doc_starts));
  return out;
}

inline TrainOptions train_options(const RunConfig& run) {
  TrainOptions t;
  t.seed = run.seed;
  t.init_std = run.init_std;
  t.init_std_qk = run.init_std_qk;
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
  const std::string written = write_tensor_dump(deck.output.dump, deck.model, deck.run.seq_len, deck.resolved_yaml,
                                                deck.options.mask, all,
                                                loss, std::move(weights), std::move(grads));
  std::printf("tensor dump: %s\n", written.c_str());
  return timer.seconds();
}

// The model side of a run on this rank: the layout, the options, the offload
// controller and the trainer, built in this order before the first step.
template <class T>
struct Training {
  ParallelSetup par;
  TensorGroup tp;           // this rank's tensor-parallel group (T = 1: alone)
  ModelConfig rank_model;   // the model one rank computes (its slice under tensor parallelism)
  AttentionGeometry geometry;
  ModelOptions opts;
  OffloadController<T> offload;
  Trainer<T> trainer;

  // observe: wraps the run's attention strategies (`minilst verify`'s capture; none in a run).
  using Observer = std::function<AttentionFactory<T>(AttentionFactory<T>)>;
  Training(const Deck& deck, MPI_Comm comm, const KernelChoice& kernels, double host_states, PhaseTimers& timers,
           const Observer& observe = {})
      : par(comm, deck.parallel, deck.run.seq_len, deck.options.mask),
        tp(tensor_group(deck, par, timers)),
        rank_model(tp.split() ? local_model(deck.model, tp.slice()) : deck.model),
        geometry(attention_geometry(rank_model, deck.parallel, par.layout(), par.sp_rank())),
        opts(options(deck, geometry, kernels)),
        // Optimizer offload's states come out of the host budget first (the fit check saw that they fit).
        offload(opts, deck.model.layers,
                activation_shapes(rank_model, geometry.local_rows, geometry.stats_shape(), geometry.saved_layout(),
                                  tp.size()),
                {deck.memory.alpha_auto, host_budget_bytes(deck.memory, comm) - host_states, deck.memory.host_budget_auto,
                 deck.memory.alpha_values},
                comm),
        trainer(deck.model, opts, train_options(deck.run), par.local_positions(), &timers,
                observe ? observe(make_attention_factory<T>(geometry, par, opts.kernels, &timers))
                        : make_attention_factory<T>(geometry, par, opts.kernels, &timers),
                zero_options(deck, par.world().size()),
                &par.states(), tp) {}

  static TensorGroup tensor_group(const Deck& deck, ParallelSetup& par, PhaseTimers& timers) {
    const int ranks = deck.parallel.tensor;
    if (ranks == 1) return TensorGroup();
    TensorGroup group(&par.tensor(), tensor_slice(deck.model, ranks, par.tensor().rank()), &timers);
    if (group.kv_copies()) par.also_count(*group.kv_copies());
    return group;
  }

  static ModelOptions options(const Deck& deck, const AttentionGeometry& g, const KernelChoice& kernels) {
    ModelOptions o = resolve_chunks(deck, deck.model, g.local_rows, sizeof(T));
    o.kernels = kernels;
    return o;
  }
  // What the metrics file records of the run's parts (the offload alpha the last step used).
  RunFacts facts(const ResolvedKernels& kernels, const RunContext& ctx) {
    RunFacts f;
    f.geometry = geometry;
    f.options = opts;
    f.options.offload.alpha = trainer.activations().alpha();
    f.kernels = kernels;
    f.host_alpha = offload.largest_alpha();
    f.reported = offload.attributes(trainer.activations());
    f.argc = ctx.argc;
    f.argv = ctx.argv;
    return f;
  }
};

// One optimizer step as a run takes it (the driver's loop and the probe's calibration):
// the replica's gradients inside the step arena (the first step recorded and planned, later
// ones replayed), step 1's offload sizing, the gradients' reduction over every rank, then
// AdamW. `before_optimizer(r)` runs between the reduction and AdamW (a run's tensor dump);
// collective traffic it causes is not counted as the step's. Collective.
template <class T, class F>
StepResult train_step(Training<T>& t, const Deck& deck, long step, PhaseTimers& timers, MPI_Comm comm, bool root,
                      F&& before_optimizer) {
  StepResult r;
  auto& arena = StepArena::instance();
  arena.begin_step();
  r.loss = t.trainer.compute_gradients(t.par.shard(batches_of(deck, step, t.par.dp_index())), 1.0 / t.par.dp_size());
  arena.end_step();
  r.moved = t.trainer.activations().take_counters();  // every copy of the step is complete
  if (step == 0) t.offload.after_first_step(t.trainer.activations(), r.moved, comm, root);
  r.loss = reduce_step(t.trainer, t.par, r.loss, &timers);  // every rank shares the weights: the step's gradient
  r.grad_norm = t.trainer.grad_norm();
  r.comm_bytes = t.par.take_comm_bytes();
  before_optimizer(r);
  t.par.take_comm_bytes();  // what before_optimizer gathered is not the step's
  t.trainer.apply_optimizer();
  compat::fence("end of step");
  const CommBytes gathers = t.par.take_comm_bytes();  // ZeRO 1, 2: the weights' gathers
  for (const CommOp op : all_of<CommOp>()) r.comm_bytes[op] += gathers[op];
  return r;
}

}  // namespace minilst
