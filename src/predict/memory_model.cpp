#include "predict/memory_model.hpp"

#include "attention/attention_geometry.hpp"
#include "attention/attention_replay.hpp"
#include "kernels/bf16.hpp"
#include "memory/memory_context.hpp"
#include "model/trainer.hpp"

namespace minilst {

namespace {
// Rank 0 of a tensor-parallel group of T (its ranks hold alike: even splits), without a communicator.
TensorGroup replay_group(const ModelConfig& cfg, int T) {
  return T > 1 ? TensorGroup(nullptr, tensor_slice(cfg, T, 0), nullptr) : TensorGroup();
}

template <class T>
MemoryPrediction replay(const ModelConfig& cfg, const ModelOptions& opts, const AttentionGeometry& g, int grad_accum,
                        double host_alpha, const ZeroOptions& zero, const TensorGroup& tp) {
  CountingMemory counting;
  Trainer<T>::replay_step(cfg, opts, zero, g.local_rows, grad_accum, host_alpha, make_replay_factory<T>(g), tp);
  MemoryPrediction p;
  const auto& tracker = counting.tracker();
  for (int c = 0; c < kNumMemCategories; ++c)
    p.bytes[category_name(MemCategory(c))] = tracker.high_water(MemCategory(c));
  p.bytes["device_total"] = tracker.device_high_water();
  p.trace = counting.recorder().recorded_trace();
  p.segments = counting.recorder().recorded_segments();
  return p;
}

template <class T>
std::map<std::string, std::uint64_t> replay_states(const ModelConfig& cfg, const ZeroOptions& zero, int tensor) {
  CountingMemory counting;
  const TensorGroup tp = replay_group(cfg, tensor);
  const ModelStates<T> states(cfg, zero, TrainOptions{}, nullptr, nullptr, tp);
  std::map<std::string, std::uint64_t> bytes;
  for (int c = 0; c < kNumMemCategories; ++c)
    bytes[category_name(MemCategory(c))] = counting.tracker().high_water(MemCategory(c));
  bytes["device_total"] = counting.tracker().device_high_water();
  return bytes;
}
}  // namespace

std::map<std::string, std::uint64_t> predict_model_states(const ModelConfig& cfg, const ZeroOptions& zero,
                                                          Precision precision, int tensor) {
  switch (precision) {
    case Precision::float64: return replay_states<double>(cfg, zero, tensor);
    case Precision::bf16: return replay_states<bf16>(cfg, zero, tensor);
    case Precision::float32: break;
  }
  return replay_states<float>(cfg, zero, tensor);
}

MemoryPrediction predict_rank_memory(const ModelConfig& cfg, const ModelOptions& opts, const ParallelConfig& par,
                                     const SequenceLayout& layout, int sp_rank, int grad_accum, Precision precision,
                                     double host_alpha, const ZeroOptions& zero) {
  const TensorGroup tp = replay_group(cfg, par.tensor);
  const auto g = attention_geometry(tp.split() ? local_model(cfg, tp.slice()) : cfg, par, layout, sp_rank);
  switch (precision) {
    case Precision::float64: return replay<double>(cfg, opts, g, grad_accum, host_alpha, zero, tp);
    case Precision::bf16: return replay<bf16>(cfg, opts, g, grad_accum, host_alpha, zero, tp);
    case Precision::float32: break;
  }
  return replay<float>(cfg, opts, g, grad_accum, host_alpha, zero, tp);
}

std::map<std::string, std::uint64_t> predict_memory(const ModelConfig& cfg, const ModelOptions& opts,
                                                    std::int64_t seq_len, Precision precision) {
  const SequenceLayout layout(seq_len, 1, 1, RingLayout::contiguous, false);
  return predict_rank_memory(cfg, opts, ParallelConfig{}, layout, 0, 1, precision, opts.offload.alpha).bytes;
}

}  // namespace minilst
