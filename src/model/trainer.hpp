// The training step: forward + backward over `grad_accum` micro-batches
// (gradients summed, each scaled by 1 / (N_valid * grad_accum), so they are the
// gradient of the mean micro-step loss), then AdamW. Owns the parameters, their
// gradients and the optimizer moments, each one flat tracked allocation.
// Model state per parameter, in bytes (float / double / bf16 mixed precision):
//   params   the weights the kernels read          4 / 8 / 2 (the bf16 copy)
//   grads    their gradients                       4 / 8 / 4
//   adam_m, adam_v                                 8 / 16 / 8
//   master   the weights AdamW updates             - / - / 4 (params is the master in float, double)
//                                          total  16 / 32 / 18 (ALST's count)
// Under bf16 the copy is refreshed from the master after every update.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "kernels/adamw.hpp"
#include "model/data.hpp"
#include "model/model.hpp"

namespace minilst {

struct TrainOptions {
  std::uint64_t seed = 1234;
  double init_std = 0.02;
  double norm_init_noise = 0.0;
  kernels::AdamWHyper adamw;
};

template <class T>
class Trainer {
 public:
  // positions: [S_local] global positions of the tokens this rank holds;
  // make_attention: its strategy (default: LocalAttention, all tokens on this rank).
  Trainer(const ModelConfig& cfg, const ModelOptions& opts, const TrainOptions& train,
          const std::vector<std::int64_t>& positions, PhaseTimers* timers,
          const AttentionFactory<T>& make_attention = nullptr);

  // Zeroes the gradients, runs every micro-batch; returns the mean micro-batch
  // loss. Gradients are those of that mean, times `scale` (1/data-parallel ranks).
  double compute_gradients(const std::vector<Batch>& micro_batches, double scale = 1.0);
  void apply_optimizer();  // AdamW on all parameters; step count from 1

  static constexpr bool kMixed = !std::is_same<T, master_t<T>>::value;  // bf16: a separate fp32 master

  const ParamSet<T>& params() const { return params_; }  // what the kernels read
  // What the optimizer updates: the fp32 master under bf16, else params() itself.
  const ParamSet<master_t<T>>& weights() const {
    if constexpr (kMixed) return *master_;
    else return params_;
  }
  ActivationStore<T>& activations() { return model_->activations(); }
  const ParamSet<master_t<T>>& grads() const { return grads_; }
  double grad_norm() const;  // ||grads||_2 over all parameters

  // `minilst plan`: one step's allocations in the run's order, without compute (call
  // it in a CountingMemory, memory/memory_context.hpp): the parameters, gradients
  // and moments, the positions, the strategy's, then grad_accum micro-steps, whose
  // trace is recorded for the arena's plan. With offload, a micro-step at
  // `first_alpha` goes first and sizes the host buffers, as the warm-up step does.
  static void replay_step(const ModelConfig& cfg, const ModelOptions& opts, std::int64_t local_tokens,
                          int grad_accum, double first_alpha, const AttentionFactory<T>& replay_attention);

 private:
  ModelConfig cfg_;
  TrainOptions train_;
  PhaseTimers* timers_;
  ParamSet<T> params_;
  ParamSet<master_t<T>> grads_, adam_m_, adam_v_;
  std::optional<ParamSet<master_t<T>>> master_;  // kMixed only
  Tracked<Vec<std::int64_t>> positions_;
  std::unique_ptr<AttentionStrategy<T>> attention_;
  std::unique_ptr<Model<T>> model_;
  long optimizer_steps_ = 0;
};

}  // namespace minilst
