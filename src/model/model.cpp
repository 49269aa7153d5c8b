#include "model/model.hpp"

#include "kernels/bf16.hpp"
#include "kernels/embedding.hpp"
#include "kernels/select.hpp"
#include "memory/step_arena.hpp"

namespace minilst {

namespace {
LogitsKeeping logits_keeping(const StorePlan& plan) {
  return plan.hf_head ? LogitsKeeping::hf_upcast
                      : plan.whole_sequence ? LogitsKeeping::separate : LogitsKeeping::in_place;
}

// What the activation store may ask the layers to redo, with this step's weights.
template <class T>
class Recompute final : public LayerRecompute<T> {
 public:
  Recompute(const DecoderLayer<T>& layer, const ParamViews<T>& params) : layer_(layer), params_(params) {}
  void attention_block(int l, const LayerActivations<T>& a) const override {
    layer_.forward_attention(a, params_.layers[l]);
  }
  void token_rows(int l, const LayerActivations<T>& a, Range rows) const override {
    layer_.recompute_rows(a, params_.layers[l], rows);
  }
  void kept_layout(int l, const LayerActivations<T>& a) const override {
    layer_.recompute_kept(a, params_.layers[l]);
  }

 private:
  const DecoderLayer<T>& layer_;
  const ParamViews<T>& params_;
};

// The same requests, replayed (no weights, no compute).
template <class T>
class ReplayRecompute final : public LayerRecompute<T> {
 public:
  explicit ReplayRecompute(const DecoderLayer<T>& layer) : layer_(layer) {}
  void attention_block(int, const LayerActivations<T>& a) const override { layer_.replay_forward_attention(a); }
  void token_rows(int, const LayerActivations<T>& a, Range rows) const override {
    layer_.replay_recompute_rows(a, rows);
  }
  void kept_layout(int, const LayerActivations<T>& a) const override { layer_.replay_recompute_kept(a); }

 private:
  const DecoderLayer<T>& layer_;
};
}  // namespace

template <class T>
Model<T>::Model(const ModelConfig& cfg, const ModelOptions& opts, AttentionStrategy<T>& attention,
                Vec<const std::int64_t> rope_positions, PhaseTimers* timers)
    : cfg_(cfg), kernels_(opts.kernels), tokens_(std::int64_t(rope_positions.extent(0))),
      layer_(cfg, opts, attention, rope_positions, timers),
      head_(cfg, opts.lm_head_chunks, opts.kernels, timers, logits_keeping(store_plan(opts.policy, cfg.layers))),
      store_(opts, cfg.layers, activation_shapes(cfg, tokens_, layer_.stats_shape(), layer_.saved_layout()), timers), timers_(timers) {}

template <class T>
double Model<T>::forward_backward(ModelStates<T>& states, const Vec<const std::int64_t>& tokens,
                                  const Vec<const std::int64_t>& labels, double grad_scale) {
  const int L = cfg_.layers;
  const int embed = ShardLayout::embed_unit(), head = states.layout().head_unit();
  double loss_sum = 0;
  auto dx = gradient_buffer("x_grad");  // the LM head zeroes it
  {
    ScopedPhase phase(timers_, Phase::forward);
    kernels::embedding_forward<T>(store_.input(0), tokens, states.acquire(embed).embed);
    states.release(embed);
    for (int l = 0; l < L; ++l) {
      const MemScope scope("L" + std::to_string(l) + ".fwd", "fwd");
      const int unit = ShardLayout::layer_unit(l);
      const auto& w = states.acquire(unit).layers[l];
      const auto a = store_.forward_begin(l);
      layer_.forward_attention(a, w);
      states.progress();  // posted gathers and reductions move between the blocks
      layer_.forward_mlp(store_.input(l + 1), a, w);
      store_.forward_end(l);
      states.release(unit);
    }
    {
      const MemScope scope("head");
      const auto& w = states.acquire(head);
      loss_sum = head_.forward_backward(dx.view(), store_.input(L), labels, w, states.gradients(head), grad_scale);
      states.gradients_done(head);
      states.release(head);
    }
    store_.head_end();
  }
  {
    ScopedPhase phase(timers_, Phase::backward);
    auto dx_in = gradient_buffer("x_grad_in");
    for (int l = L - 1; l >= 0; --l) {
      const MemScope scope("L" + std::to_string(l) + ".bwd", "bwd");
      const int unit = ShardLayout::layer_unit(l);
      const auto& w = states.acquire(unit);
      const Recompute<T> redo(layer_, w);
      const auto a = store_.backward_begin(l, redo);
      states.progress();
      layer_.backward(dx_in.view(), states.gradients(unit).layers[l], dx.view(), a, w.layers[l]);
      states.gradients_done(unit);
      store_.backward_end(l);
      states.release(unit);
      std::swap(dx, dx_in);  // dx := gradient w.r.t. this layer's input
    }
    kernels::embedding_backward<T>(kernels_, states.gradients(embed).embed, tokens, dx.view());
    states.gradients_done(embed);
  }
  return loss_sum;
}

template <class T>
void Model<T>::replay_micro_step() {
  const int L = cfg_.layers;
  auto dx = gradient_buffer("x_grad");
  store_.input(0);
  for (int l = 0; l < L; ++l) {
    const MemScope scope("L" + std::to_string(l) + ".fwd", "fwd");
    const auto a = store_.forward_begin(l);
    layer_.replay_forward_attention(a);
    store_.input(l + 1);
    layer_.replay_forward_mlp(a);
    store_.forward_end(l);
  }
  {
    const MemScope scope("head");
    store_.input(L);
    head_.replay(tokens_);
  }
  store_.head_end();
  auto dx_in = gradient_buffer("x_grad_in");
  const ReplayRecompute<T> redo(layer_);
  for (int l = L - 1; l >= 0; --l) {
    const MemScope scope("L" + std::to_string(l) + ".bwd", "bwd");
    const auto a = store_.backward_begin(l, redo);
    layer_.replay_backward(a);
    store_.backward_end(l);
    std::swap(dx, dx_in);
  }
}

template class Model<float>;
template class Model<double>;
template class Model<bf16>;

}  // namespace minilst
