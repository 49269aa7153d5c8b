// The training step: forward + backward over `grad_accum` micro-batches
// (gradients summed, each scaled by 1 / (N_valid * grad_accum), so they are the
// gradient of the mean micro-step loss), then AdamW. The model states (weights,
// gradients, moments, master weights; replicated or ZeRO-sharded, on the device or
// offloaded) are model_states.hpp's, whose header gives the bytes of each stage.
// Model state per parameter, replicated, in bytes (float / double / bf16 mixed precision):
//   params   the weights the kernels read          4 / 8 / 2 (the bf16 copy)
//   grads    their gradients                       4 / 8 / 4
//   adam_m, adam_v                                 8 / 16 / 8
//   master   the weights AdamW updates             - / - / 4 (params is the master in float, double)
//                                          total  16 / 32 / 18 (ALST's count)
// Under bf16 the copy is refreshed from the master after every update.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "model/data.hpp"
#include "model/model.hpp"

namespace minilst {

template <class T>
class Trainer {
 public:
  // positions: [S_local] global positions of the tokens this rank holds; opts.mask: the
  // sequence's documents and window (and the layers it holds in), from which the attention's
  // first visible positions (q_lo) and the rotary positions (within each document) follow;
  // make_attention: its strategy (default: LocalAttention, all tokens on this rank), made
  // once per layer mask: for the windowed layers and for the others (at most two);
  // zero, world: where the model states live and the ranks they are sharded over.
  // Tensor parallelism: cfg is the whole model, tp this rank's group (which outlives the
  // trainer), world the ranks holding the same slice; positions are the group's sequence
  // piece (T n tokens), the batches too; make_attention's strategies run one rank's heads.
  Trainer(const ModelConfig& cfg, const ModelOptions& opts, const TrainOptions& train,
          const std::vector<std::int64_t>& positions, PhaseTimers* timers,
          const AttentionFactory<T>& make_attention = nullptr, const ZeroOptions& zero = ZeroOptions{},
          Communicator* world = nullptr, const TensorGroup& tp = TensorGroup::none());

  // Zeroes the gradients, runs every micro-batch; returns the mean micro-batch
  // loss. Gradients are those of that mean, times `scale` (1/data-parallel ranks);
  // under ZeRO 2 and 3 they are already being reduced.
  double compute_gradients(const std::vector<Batch>& micro_batches, double scale = 1.0);
  void reduce_gradients() { states_.reduce_gradients(); }  // every rank's gradients summed
  void apply_optimizer();  // AdamW on all parameters; step count from 1

  static constexpr bool kMixed = ModelStates<T>::kMixed;

  ModelStates<T>& states() { return states_; }
  const ParamSet<T>& params() const { return states_.params(); }  // what the kernels read (not at stage 3)
  const ParamSet<master_t<T>>& grads() const { return states_.grads(); }  // stages 0, 1
  ActivationStore<T>& activations() { return model_->activations(); }
  double grad_norm() { return states_.grad_norm(); }  // ||grads||_2 over all parameters (collective from stage 2)

  // `minilst plan`: one step's allocations in the run's order, without compute (call
  // it in a CountingMemory, memory/memory_context.hpp): the model states, the
  // positions (and the masks' q_lo and rotary positions), the strategies', then
  // grad_accum micro-steps, whose trace is recorded
  // for the arena's plan. With offload, a micro-step at `first_alpha` goes first and
  // sizes the host buffers, as the warm-up step does.
  // tp: a group without a communicator (TensorGroup(nullptr, slice, nullptr)) under tensor parallelism.
  static void replay_step(const ModelConfig& cfg, const ModelOptions& opts, const ZeroOptions& zero,
                          std::int64_t local_tokens, int grad_accum, double first_alpha,
                          const AttentionFactory<T>& replay_attention, const TensorGroup& tp = TensorGroup::none());

 private:
  ModelConfig cfg_;
  TrainOptions train_;
  PhaseTimers* timers_;
  ModelStates<T> states_;
  Tracked<Vec<std::int64_t>> positions_;       // [S_local] global positions
  Tracked<Vec<std::int64_t>> q_lo_[2];         // [S_local] first visible positions, of the windowed layers [1]
                                               // and the others [0] (none: causal, or no layer has that mask)
  Tracked<Vec<std::int64_t>> rope_positions_;  // [S_local] positions within the documents (none: one document)
  Vec<const std::int64_t> rope_view() const {
    return rope_positions_.bytes() > 0 ? rope_positions_.view() : positions_.view();
  }
  std::unique_ptr<AttentionStrategy<T>> attention_[2];  // the strategies of those layers (null: no such layer)
  std::unique_ptr<Model<T>> model_;
  long optimizer_steps_ = 0;
};

}  // namespace minilst
