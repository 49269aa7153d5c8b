#include "model/trainer.hpp"

#include <stdexcept>

#include "attention/local_attention.hpp"
#include "kernels/bf16.hpp"
#include "memory/step_arena.hpp"

namespace minilst {

namespace {
// Token indices on the device: positions, tokens, labels [n].
Tracked<Vec<std::int64_t>> index_buffer(const char* label, std::int64_t n) {
  return Tracked<Vec<std::int64_t>>(label, MemCategory::workspace, n);
}

// Host vector -> tracked device vector.
Tracked<Vec<std::int64_t>> to_device(const std::vector<std::int64_t>& host, const char* label) {
  auto dev = index_buffer(label, std::int64_t(host.size()));
  Kokkos::View<const std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> src(host.data(), host.size());
  Kokkos::deep_copy(dev.view(), src);
  return dev;
}

// The model one rank of the tensor-parallel group computes (the whole one at T = 1).
ModelConfig one_rank(const ModelConfig& cfg, const TensorGroup& tp) {
  return tp.split() ? local_model(cfg, tp.slice()) : cfg;
}

// Whether some layer of `layers` attends with the window (windowed) or without it.
bool some_layer(const SequenceMask& mask, int layers, bool windowed) {
  for (int l = 0; l < layers; ++l)
    if (mask.windowed(l) == windowed) return true;
  return false;
}

// What the mask adds beside the positions [n] (none for plain causal attention, so a
// run without documents or window allocates what it always did):
//   first visible positions  [n]  per layer mask some layer has, unless causal: q_lo[1] the
//                                 windowed layers', q_lo[0] the others' (the documents only)
//   rotary positions         [n]  with documents (the position within the document)
struct MaskBuffers {
  Tracked<Vec<std::int64_t>> q_lo[2], rope;
};
MaskBuffers mask_buffers(const SequenceMask& mask, int layers, std::int64_t n) {
  MaskBuffers b;
  for (const int w : {1, 0})
    if (some_layer(mask, layers, w) && !mask.of_layers(w).causal_only()) b.q_lo[w] = index_buffer("positions_q_lo", n);
  if (mask.has_documents()) b.rope = index_buffer("rope_positions", n);
  return b;
}
MaskBuffers mask_buffers(const SequenceMask& mask, int layers, const std::vector<std::int64_t>& positions) {
  if (const auto why = mask.problem(); !why.empty()) throw std::invalid_argument("attention mask: " + why);
  if (const auto why = mask.window_layers.problem(layers); !why.empty())
    throw std::invalid_argument("attention mask: the sliding window's layers: " + why);
  MaskBuffers b = mask_buffers(mask, layers, std::int64_t(positions.size()));
  using HostIds = Kokkos::View<const std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  for (const int w : {1, 0})
    if (b.q_lo[w].bytes() > 0) {
      const auto q_lo = mask.of_layers(w).q_lo(positions);
      Kokkos::deep_copy(b.q_lo[w].view(), HostIds(q_lo.data(), q_lo.size()));
    }
  if (b.rope.bytes() > 0) {
    const auto rope = mask.rope_positions(positions);
    Kokkos::deep_copy(b.rope.view(), HostIds(rope.data(), rope.size()));
  }
  return b;
}
}  // namespace

template <class T>
Trainer<T>::Trainer(const ModelConfig& cfg, const ModelOptions& opts, const TrainOptions& train,
                    const std::vector<std::int64_t>& positions, PhaseTimers* timers,
                    const AttentionFactory<T>& make_attention, const ZeroOptions& zero, Communicator* world,
                    const TensorGroup& tp)
    : cfg_(cfg), train_(train), timers_(timers), states_(cfg, zero, train, world, timers, tp),
      positions_(to_device(positions, "positions")) {
  auto masks = mask_buffers(opts.mask, cfg.layers, positions);
  for (const int w : {1, 0}) q_lo_[w] = std::move(masks.q_lo[w]);
  rope_positions_ = std::move(masks.rope);
  typename Model<T>::LayerAttention layer_attention{};
  for (const int w : {1, 0}) {  // a strategy per mask some layer has
    if (!some_layer(opts.mask, cfg.layers, w)) continue;
    attention_[w] = make_attention ? make_attention(positions_.view(), q_lo_[w].view(), opts.mask.of_layers(w))
                                   : std::make_unique<LocalAttention<T>>(positions_.view(), q_lo_[w].view(),
                                                                         cfg.head_dim(), opts.kernels);
    layer_attention[w] = attention_[w].get();
  }
  model_ = std::make_unique<Model<T>>(one_rank(cfg, tp), opts, layer_attention, rope_view(), timers, tp);
}

template <class T>
double Trainer<T>::compute_gradients(const std::vector<Batch>& micro_batches, double scale) {
  states_.zero_gradients();
  const double n_micro = double(micro_batches.size());
  double loss = 0;
  for (const auto& batch : micro_batches) {
    const auto tokens = to_device(batch.tokens, "tokens");
    const auto labels = to_device(batch.labels, "labels");
    // A batch with no valid label contributes zero loss and zero gradient (never NaN).
    const double inv_valid = batch.n_valid > 0 ? 1.0 / double(batch.n_valid) : 0.0;
    const double loss_sum = model_->forward_backward(states_, tokens.view(), labels.view(), inv_valid / n_micro * scale);
    loss += loss_sum * inv_valid / n_micro;
  }
  return loss;
}

template <class T>
void Trainer<T>::replay_step(const ModelConfig& cfg, const ModelOptions& opts, const ZeroOptions& zero,
                             std::int64_t local_tokens, int grad_accum, double first_alpha,
                             const AttentionFactory<T>& replay_attention, const TensorGroup& tp) {
  const ModelStates<T> states(cfg, zero, TrainOptions{}, nullptr, nullptr, tp);
  const auto positions = index_buffer("positions", local_tokens);
  const auto masks = mask_buffers(opts.mask, cfg.layers, local_tokens);
  std::unique_ptr<AttentionStrategy<T>> attention[2];  // as the constructor's
  typename Model<T>::LayerAttention layer_attention{};
  for (const int w : {1, 0}) {
    if (!some_layer(opts.mask, cfg.layers, w)) continue;
    attention[w] = replay_attention(positions.view(), masks.q_lo[w].view(), opts.mask.of_layers(w));
    layer_attention[w] = attention[w].get();
  }
  ModelOptions first = opts;
  first.offload.alpha = first_alpha;
  Model<T> model(one_rank(cfg, tp), first, layer_attention, masks.rope.bytes() > 0 ? masks.rope.view() : positions.view(),
                 nullptr, tp);
  const auto micro_step = [&] {
    const auto tokens = index_buffer("tokens", local_tokens), labels = index_buffer("labels", local_tokens);
    model.replay_micro_step();
  };
  if (first_alpha != opts.offload.alpha) {  // the warm-up step's alpha sized the host buffers
    micro_step();
    model.activations().set_alpha(opts.offload.alpha);
  }
  auto& arena = StepArena::instance();
  arena.begin_step();
  for (int a = 0; a < grad_accum; ++a) micro_step();
  arena.end_step();
}

template <class T>
void Trainer<T>::apply_optimizer() {
  states_.apply_optimizer(train_.adamw, ++optimizer_steps_);
}

template class Trainer<float>;
template class Trainer<double>;
template class Trainer<bf16>;

}  // namespace minilst
