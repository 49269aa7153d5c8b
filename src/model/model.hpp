// The decoder model: embedding, L decoder layers, final norm, LM head + loss.
// One call runs a micro-step's forward, loss and backward; the loss gradient is
// known in the forward (fused cross-entropy), so the LM head's backward runs
// chunk by chunk right after its forward and the [S, V] logits never exist.
// What the layers keep for their backward lives in the activation store
// (memory/activation_store.hpp), whose policy is memory.policy.
// Tensor parallelism (model/tensor_group.hpp): the model is one rank's (local_model), the
// tokens, labels and rotary positions the group's sequence piece [S], the residual stream
// this rank's n = S / T rows of it (rows [t n, (t+1) n)). The embedding is vocabulary
// parallel: each rank looks up the rows of its vocabulary for all S tokens ([S, d], zeros
// elsewhere), reduce-scattered to its n rows; its backward gathers dx to [S, d].
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "memory/activation_store.hpp"
#include "model/decoder_layer.hpp"
#include "model/lm_head.hpp"
#include "model/model_states.hpp"

namespace minilst {

template <class T>
class Model {
 public:
  // The attention strategies of the layers, by mask: [1] the layers with the sliding
  // window (opts.mask.windowed(l)), [0] the others (the documents only); null where no
  // layer has that mask. Both attend in the same layout (one geometry), so the store's
  // shapes are the same for every layer.
  using LayerAttention = std::array<AttentionStrategy<T>*, 2>;
  // rope_positions: [S] rotary positions of the local tokens: their global positions, or
  // with packed documents their positions within their documents (SequenceMask); the
  // attention strategies mask with the global ones.
  // tp: the tensor-parallel group (T = 1: the default group); it outlives the model.
  Model(const ModelConfig& cfg, const ModelOptions& opts, const LayerAttention& attention,
        Vec<const std::int64_t> rope_positions, PhaseTimers* timers, const TensorGroup& tp = TensorGroup::none());

  // tokens, labels: [S]. Gradients accumulate (+=) into the states' gradients, scaled
  // so that grad_scale = 1 / (global valid labels * micro-steps) gives the mean loss's
  // gradient. The weights and gradients are taken unit by unit (embedding, layers,
  // head: ModelStates, which gathers and reduces them under ZeRO). Returns the sum
  // over local valid labels of the token losses.
  double forward_backward(ModelStates<T>& states, const Vec<const std::int64_t>& tokens,
                          const Vec<const std::int64_t>& labels, double grad_scale);
  // `minilst plan`'s twin: the micro-step's buffers, in the same order, no compute.
  void replay_micro_step();

  ActivationStore<T>& activations() { return store_; }
  const ActivationStore<T>& activations() const { return store_; }
  // Layer l's computation: the decoder layer with its mask's strategy.
  const DecoderLayer<T>& layer(int l) const { return *layers_[windowed_.at(l)]; }

 private:
  // dx: the gradient flowing back through the layers, [n, d] (each layer turns the gradient
  // w.r.t. its output into the one w.r.t. its input, in place).
  Tracked<Mat<T>> gradient_buffer(const char* label) const {
    return Tracked<Mat<T>>(uninitialized, label, MemCategory::workspace, tokens_, cfg_.hidden);
  }
  // The embedding of the S tokens into x_0 [n, d], and dE += its backward from dx [n, d]
  // (vocabulary parallel under tensor parallelism); E, dE null: a replay.
  void embed(const Mat<T>& x0, const Vec<const std::int64_t>& tokens, const Mat<const T>* E) const;
  void embed_backward(const Mat<master_t<T>>* dE, const Vec<const std::int64_t>& tokens, const Mat<const T>& dx) const;

  ModelConfig cfg_;
  KernelChoice kernels_;
  const TensorGroup& tp_;
  std::int64_t tokens_;  // n: the residual stream's rows
  std::vector<int> windowed_;                       // [L] 1: layer l attends within the window
  std::array<std::optional<DecoderLayer<T>>, 2> layers_;  // by mask, as the strategies
  const DecoderLayer<T>& any_layer() const { return layers_[1] ? *layers_[1] : *layers_[0]; }
  LmHeadLoss<T> head_;
  ActivationStore<T> store_;
  PhaseTimers* timers_;
};

}  // namespace minilst
