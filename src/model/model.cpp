#include "model/model.hpp"

#include "kernels/bf16.hpp"
#include "kernels/embedding.hpp"
#include "kernels/select.hpp"
#include "memory/step_arena.hpp"

namespace minilst {

namespace {
LogitsKeeping logits_keeping(const StoreBuffers& plan) {
  return plan.hf_head ? LogitsKeeping::hf_upcast
                      : plan.whole_sequence ? LogitsKeeping::separate : LogitsKeeping::in_place;
}

// What the activation store may ask the layers to redo, with this step's weights (each
// layer with its own mask).
template <class T>
class Recompute final : public LayerRecompute<T> {
 public:
  Recompute(const Model<T>& model, const ParamViews<T>& params) : model_(model), params_(params) {}
  void attention_block(int l, const LayerActivations<T>& a) const override {
    model_.layer(l).forward_attention(a, params_.layers[l]);
  }
  void token_rows(int l, const LayerActivations<T>& a, Range rows) const override {
    model_.layer(l).recompute_rows(a, params_.layers[l], rows);
  }
  void kept_layout(int l, const LayerActivations<T>& a) const override {
    model_.layer(l).recompute_kept(a, params_.layers[l]);
  }

 private:
  const Model<T>& model_;
  const ParamViews<T>& params_;
};

// The same requests, replayed (no weights, no compute).
template <class T>
class ReplayRecompute final : public LayerRecompute<T> {
 public:
  explicit ReplayRecompute(const Model<T>& model) : model_(model) {}
  void attention_block(int l, const LayerActivations<T>& a) const override {
    model_.layer(l).replay_forward_attention(a);
  }
  void token_rows(int l, const LayerActivations<T>& a, Range rows) const override {
    model_.layer(l).replay_recompute_rows(a, rows);
  }
  void kept_layout(int l, const LayerActivations<T>& a) const override { model_.layer(l).replay_recompute_kept(a); }

 private:
  const Model<T>& model_;
};

// [L] 1 where layer l attends within the sliding window; checks that each mask has its strategy.
template <class T>
std::vector<int> windowed_layers(const ModelConfig& cfg, const SequenceMask& mask,
                                 const typename Model<T>::LayerAttention& attention) {
  std::vector<int> w(cfg.layers);
  for (int l = 0; l < cfg.layers; ++l) {
    w[l] = mask.windowed(l) ? 1 : 0;
    if (!attention[w[l]])
      throw std::logic_error("model: layer " + std::to_string(l) + " has no attention strategy for its mask");
  }
  return w;
}
}  // namespace

template <class T>
Model<T>::Model(const ModelConfig& cfg, const ModelOptions& opts, const LayerAttention& attention,
                Vec<const std::int64_t> rope_positions, PhaseTimers* timers, const TensorGroup& tp)
    : cfg_(cfg), kernels_(opts.kernels), tp_(tp), tokens_(std::int64_t(rope_positions.extent(0)) / tp.size()),
      windowed_(windowed_layers<T>(cfg, opts.mask, attention)),
      layers_([&] {
        std::array<std::optional<DecoderLayer<T>>, 2> layers;
        for (int w = 0; w < 2; ++w)
          if (attention[w]) layers[w].emplace(cfg, opts, *attention[w], rope_positions, timers, tp);
        const auto same = [](Extent2 a, Extent2 b) { return a.rows == b.rows && a.cols == b.cols; };
        if (layers[0] && layers[1] &&
            (!same(layers[0]->stats_shape(), layers[1]->stats_shape()) ||
             !same(layers[0]->saved_layout().q, layers[1]->saved_layout().q) ||
             !same(layers[0]->saved_layout().kv, layers[1]->saved_layout().kv) ||
             layers[0]->saved_layout().local != layers[1]->saved_layout().local))
          throw std::logic_error("model: the windowed and the other layers' strategies keep different shapes");
        return layers;
      }()),
      head_(cfg, opts.lm_head_chunks, opts.kernels, timers, logits_keeping(store_buffers(opts.policy, cfg.layers)), tp),
      store_(opts, cfg.layers,
             activation_shapes(cfg, std::int64_t(rope_positions.extent(0)), any_layer().stats_shape(),
                               any_layer().saved_layout(), tp.size()),
             timers),
      timers_(timers) {
  if (tokens_ * tp.size() != std::int64_t(rope_positions.extent(0)))
    throw std::logic_error("model: the tensor-parallel ranks do not split the sequence piece evenly");
}

template <class T>
void Model<T>::embed(const Mat<T>& x0, const Vec<const std::int64_t>& tokens, const Mat<const T>* E) const {
  if (!tp_.split()) {
    if (E) kernels::embedding_forward<T>(x0, tokens, *E);
    return;
  }
  // this rank's vocabulary rows of all S tokens' embeddings (zeros for the others), summed over the group
  const Tracked<Mat<T>> partial(uninitialized, "embed_partial", MemCategory::workspace, tokens_ * tp_.size(), cfg_.hidden);
  if (E) kernels::embedding_forward<T>(partial.view(), tokens, *E, tp_.slice().vocab0);
  tp_.reduce_scatter<T>(x0, partial.view(), false);
}

template <class T>
void Model<T>::embed_backward(const Mat<master_t<T>>* dE, const Vec<const std::int64_t>& tokens,
                              const Mat<const T>& dx) const {
  if (!tp_.split()) {
    if (dE) kernels::embedding_backward<T>(kernels_, *dE, tokens, dx);
    return;
  }
  const Tracked<Mat<T>> gathered(uninitialized, "x_grad_all", MemCategory::workspace, tokens_ * tp_.size(), cfg_.hidden);
  tp_.gather<T>(gathered.view(), dx);
  if (dE) kernels::embedding_backward<T>(kernels_, *dE, tokens, gathered.view(), tp_.slice().vocab0);
}

template <class T>
double Model<T>::forward_backward(ModelStates<T>& states, const Vec<const std::int64_t>& tokens,
                                  const Vec<const std::int64_t>& labels, double grad_scale) {
  const int L = cfg_.layers;
  const int embed = ShardLayout::embed_unit(), head = states.layout().head_unit();
  double loss_sum = 0;
  auto dx = gradient_buffer("x_grad");  // the LM head zeroes it
  {
    ScopedPhase phase(timers_, Phase::forward);
    const Mat<const T> E = states.acquire(embed).embed;
    this->embed(store_.input(0), tokens, &E);
    states.release(embed);
    for (int l = 0; l < L; ++l) {
      const MemScope scope("L" + std::to_string(l) + ".fwd", "fwd");
      const int unit = ShardLayout::layer_unit(l);
      const auto& w = states.acquire(unit).layers[l];
      const auto a = store_.forward_begin(l);
      layer(l).forward_attention(a, w);
      states.progress();  // posted gathers and reductions move between the blocks
      layer(l).forward_mlp(store_.input(l + 1), a, w);
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
    for (int l = L - 1; l >= 0; --l) {
      const MemScope scope("L" + std::to_string(l) + ".bwd", "bwd");
      const int unit = ShardLayout::layer_unit(l);
      const auto& w = states.acquire(unit);
      const Recompute<T> redo(*this, w);
      const auto a = store_.backward_begin(l, redo);
      states.progress();
      // in place: dx := gradient w.r.t. this layer's input, from dx = the gradient w.r.t. its output
      layer(l).backward(dx.view(), states.gradients(unit).layers[l], dx.view(), a, w.layers[l]);
      states.gradients_done(unit);
      store_.backward_end(l);
      states.release(unit);
    }
    const Mat<master_t<T>> dE = states.gradients(embed).embed;
    embed_backward(&dE, tokens, dx.view());
    states.gradients_done(embed);
  }
  return loss_sum;
}

template <class T>
void Model<T>::replay_micro_step() {
  const int L = cfg_.layers;
  auto dx = gradient_buffer("x_grad");
  embed(store_.input(0), Vec<const std::int64_t>(), nullptr);
  for (int l = 0; l < L; ++l) {
    const MemScope scope("L" + std::to_string(l) + ".fwd", "fwd");
    const auto a = store_.forward_begin(l);
    layer(l).replay_forward_attention(a);
    store_.input(l + 1);
    layer(l).replay_forward_mlp(a);
    store_.forward_end(l);
  }
  {
    const MemScope scope("head");
    store_.input(L);
    head_.replay(tokens_);
  }
  store_.head_end();
  const ReplayRecompute<T> redo(*this);
  for (int l = L - 1; l >= 0; --l) {
    const MemScope scope("L" + std::to_string(l) + ".bwd", "bwd");
    const auto a = store_.backward_begin(l, redo);
    layer(l).replay_backward(a);
    store_.backward_end(l);
  }
  embed_backward(nullptr, Vec<const std::int64_t>(), dx.view());
}

template class Model<float>;
template class Model<double>;
template class Model<bf16>;

}  // namespace minilst
