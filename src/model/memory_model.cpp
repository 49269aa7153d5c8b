#include "model/memory_model.hpp"

#include "attention/attention_geometry.hpp"
#include "attention/attention_replay.hpp"
#include "kernels/bf16.hpp"
#include "memory/memory_context.hpp"
#include "model/trainer.hpp"

namespace minilst {

namespace {
template <class T>
MemoryPrediction replay(const ModelConfig& cfg, const ModelOptions& opts, const AttentionGeometry& g, int grad_accum,
                        double host_alpha) {
  CountingMemory counting;
  Trainer<T>::replay_step(cfg, opts, g.local_rows, grad_accum, host_alpha, make_replay_factory<T>(g));
  MemoryPrediction p;
  const auto& tracker = counting.tracker();
  for (int c = 0; c < kNumMemCategories; ++c)
    p.bytes[category_name(MemCategory(c))] = tracker.high_water(MemCategory(c));
  p.bytes["device_total"] = tracker.device_high_water();
  p.trace = counting.recorder().recorded_trace();
  p.segments = counting.recorder().recorded_segments();
  return p;
}
}  // namespace

MemoryPrediction predict_rank_memory(const ModelConfig& cfg, const ModelOptions& opts, const ParallelConfig& par,
                                     const SequenceLayout& layout, int sp_rank, int grad_accum, Precision precision,
                                     double host_alpha) {
  const auto g = attention_geometry(cfg, par, layout, sp_rank);
  switch (precision) {
    case Precision::float64: return replay<double>(cfg, opts, g, grad_accum, host_alpha);
    case Precision::bf16: return replay<bf16>(cfg, opts, g, grad_accum, host_alpha);
    case Precision::float32: break;
  }
  return replay<float>(cfg, opts, g, grad_accum, host_alpha);
}

std::map<std::string, std::uint64_t> predict_memory(const ModelConfig& cfg, const ModelOptions& opts,
                                                    std::int64_t seq_len, Precision precision) {
  const SequenceLayout layout(seq_len, 1, 1, RingLayout::contiguous, false);
  return predict_rank_memory(cfg, opts, ParallelConfig{}, layout, 0, 1, precision, opts.offload.alpha).bytes;
}

}  // namespace minilst
