#include "model/trainer.hpp"

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
}  // namespace

template <class T>
Trainer<T>::Trainer(const ModelConfig& cfg, const ModelOptions& opts, const TrainOptions& train,
                    const std::vector<std::int64_t>& positions, PhaseTimers* timers,
                    const AttentionFactory<T>& make_attention, const ZeroOptions& zero, Communicator* world)
    : cfg_(cfg), train_(train), timers_(timers), states_(cfg, zero, train, world, timers),
      positions_(to_device(positions, "positions")) {
  attention_ = make_attention ? make_attention(positions_.view())
                             : std::make_unique<LocalAttention<T>>(positions_.view(), cfg.head_dim(), opts.kernels);
  model_ = std::make_unique<Model<T>>(cfg, opts, *attention_, positions_.view(), timers);
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
                             const AttentionFactory<T>& replay_attention) {
  const ModelStates<T> states(cfg, zero, TrainOptions{}, nullptr, nullptr);
  const auto positions = index_buffer("positions", local_tokens);
  const auto attention = replay_attention(positions.view());
  ModelOptions first = opts;
  first.offload.alpha = first_alpha;
  Model<T> model(cfg, first, *attention, positions.view(), nullptr);
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
