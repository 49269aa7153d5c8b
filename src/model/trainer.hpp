// The training step: forward + backward over `grad_accum` micro-batches
// (gradients summed, each scaled by 1 / (N_valid * grad_accum), so they are the
// gradient of the mean micro-step loss), then AdamW. Owns the parameters, their
// gradients and the optimizer moments, each one flat tracked allocation.
#pragma once

#include <functional>
#include <memory>
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

// Builds the attention strategy from the device positions of the local tokens
// (default: LocalAttention, all tokens on this rank).
template <class T>
using AttentionFactory = std::function<std::unique_ptr<AttentionStrategy<T>>(Vec<const std::int64_t> positions)>;

template <class T>
class Trainer {
 public:
  // positions: [S_local] global positions of the tokens this rank holds.
  Trainer(const ModelConfig& cfg, const ModelOptions& opts, const TrainOptions& train,
          const std::vector<std::int64_t>& positions, PhaseTimers* timers,
          const AttentionFactory<T>& make_attention = nullptr);

  // Zeroes the gradients, runs every micro-batch; returns the mean micro-batch
  // loss. Gradients are those of that mean, times `scale` (1/data-parallel ranks).
  double compute_gradients(const std::vector<Batch>& micro_batches, double scale = 1.0);
  void apply_optimizer();  // AdamW on all parameters; step count from 1

  const ParamSet<T>& params() const { return params_; }
  ActivationStore<T>& activations() { return model_->activations(); }
  const ParamSet<T>& grads() const { return grads_; }
  double grad_norm() const;  // ||grads||_2 over all parameters

 private:
  ModelConfig cfg_;
  TrainOptions train_;
  PhaseTimers* timers_;
  ParamSet<T> params_, grads_, adam_m_, adam_v_;
  Tracked<Vec<std::int64_t>> positions_;
  std::unique_ptr<AttentionStrategy<T>> attention_;
  std::unique_ptr<Model<T>> model_;
  long optimizer_steps_ = 0;
};

}  // namespace minilst
