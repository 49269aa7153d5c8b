#include "model/trainer.hpp"

#include <cmath>

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
                    const AttentionFactory<T>& make_attention)
    : cfg_(cfg), train_(train), timers_(timers),
      params_(cfg, "params", MemCategory::weights),
      grads_(cfg, "grads", MemCategory::gradients),
      adam_m_(cfg, "adam_m", MemCategory::optimizer),
      adam_v_(cfg, "adam_v", MemCategory::optimizer),
      positions_(to_device(positions, "positions")) {
  if constexpr (kMixed) {  // the master is drawn, the copy rounded from it
    master_.emplace(cfg, "master_weights", MemCategory::optimizer);
    init_parameters(*master_, train.seed, train.init_std, train.norm_init_noise);
    kernels::copy_rounded<T, master_t<T>>(params_.flat(), master_->flat());
  } else {
    init_parameters(params_, train.seed, train.init_std, train.norm_init_noise);
  }
  attention_ = make_attention ? make_attention(positions_.view())
                             : std::make_unique<LocalAttention<T>>(positions_.view(), cfg.head_dim(), opts.kernels);
  model_ = std::make_unique<Model<T>>(cfg, opts, *attention_, positions_.view(), timers);
}

template <class T>
double Trainer<T>::compute_gradients(const std::vector<Batch>& micro_batches, double scale) {
  grads_.zero();
  const double n_micro = double(micro_batches.size());
  double loss = 0;
  for (const auto& batch : micro_batches) {
    const auto tokens = to_device(batch.tokens, "tokens");
    const auto labels = to_device(batch.labels, "labels");
    // A batch with no valid label contributes zero loss and zero gradient (never NaN).
    const double inv_valid = batch.n_valid > 0 ? 1.0 / double(batch.n_valid) : 0.0;
    const double loss_sum = model_->forward_backward(params_, grads_, tokens.view(), labels.view(),
                                                     inv_valid / n_micro * scale);
    loss += loss_sum * inv_valid / n_micro;
  }
  return loss;
}

template <class T>
void Trainer<T>::replay_step(const ModelConfig& cfg, const ModelOptions& opts, std::int64_t local_tokens,
                             int grad_accum, double first_alpha, const AttentionFactory<T>& replay_attention) {
  const ParamSet<T> params(cfg, "params", MemCategory::weights);
  const ParamSet<master_t<T>> grads(cfg, "grads", MemCategory::gradients), adam_m(cfg, "adam_m", MemCategory::optimizer),
      adam_v(cfg, "adam_v", MemCategory::optimizer);
  const auto positions = index_buffer("positions", local_tokens);
  std::optional<ParamSet<master_t<T>>> master;
  if constexpr (kMixed) master.emplace(cfg, "master_weights", MemCategory::optimizer);
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
  ScopedPhase phase(timers_, Phase::optimizer);
  // Under bf16 the master is updated and the bf16 copy the kernels read refreshed in one pass.
  kernels::adamw_update<master_t<T>, T>(weights().flat(), grads_.flat(), adam_m_.flat(), adam_v_.flat(),
                                        ++optimizer_steps_, train_.adamw, kMixed ? params_.flat() : Vec<T>());
}

template <class T>
double Trainer<T>::grad_norm() const {
  // Blocks of 4096 elements, each summed in a vectorised loop, the blocks in double.
  const auto g = grads_.flat();
  const std::int64_t n = std::int64_t(g.extent(0)), block = 4096;
  double sum = 0;
  Kokkos::parallel_reduce("grad_norm", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(0, (n + block - 1) / block),
      KOKKOS_LAMBDA(const std::int64_t b, double& acc) {
        const std::int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
        const master_t<T>* gp = g.data();
        accum_t<T> s = 0;
#ifdef MINILST_HOST_SIMD
#pragma omp simd reduction(+ : s)
#endif
        for (std::int64_t i = i0; i < i1; ++i) s += accum_t<T>(gp[i]) * accum_t<T>(gp[i]);
        acc += double(s);
      }, sum);
  return std::sqrt(sum);
}

template class Trainer<float>;
template class Trainer<double>;
template class Trainer<bf16>;

}  // namespace minilst
