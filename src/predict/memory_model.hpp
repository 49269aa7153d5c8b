// The memory model of one rank's training step: the bytes each tracked category
// reaches at its high-water mark, and the step's buffer trace (whose plan is the
// arena a planned run allocates: step_arena.hpp), for any shape, policy, chunking
// and parallel layout, without running or allocating anything. It is not a second
// description of the buffers: it runs the step's own allocation sequence
// (Trainer::replay_step and the replay_ twin of every component, the activation
// store itself, the attention strategies' buffer functions) in a counting memory
// context (memory/memory_context.hpp). So every buffer's size is written once,
// where the code allocates it, and tests hold measured and predicted equal to the
// byte, category by category, on every layout they run.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/parallel_config.hpp"
#include "memory/planner.hpp"
#include "parallel/sequence_layout.hpp"

namespace minilst {

struct MemoryPrediction {
  std::map<std::string, std::uint64_t> bytes;  // category -> high-water (+ device_total)
  std::vector<TraceBuffer> trace;              // the step's buffers (the planner's input)
  std::vector<TraceSegment> segments;
};

// One rank (sp rank `sp_rank` of `layout`) of a run with this parallel
// configuration: grad_accum micro-steps of one step (under tensor parallelism, par.tensor,
// any rank of its group: they hold alike; zero.ranks: the ranks holding the same slice). host_alpha: the largest
// offload alpha of the run (the warm-up step's: it sizes the host buffers);
// opts.offload.alpha: the step's. zero: the model states' sharding and offload.
MemoryPrediction predict_rank_memory(const ModelConfig& cfg, const ModelOptions& opts, const ParallelConfig& par,
                                     const SequenceLayout& layout, int sp_rank, int grad_accum, Precision precision,
                                     double host_alpha, const ZeroOptions& zero = ZeroOptions{});

// The model states alone (category -> bytes, device_total): weights, gradients,
// optimizer and their ZeRO buffers, host_optimizer with offload. Cheap (no step).
// tensor: the tensor-parallel degree (the states are one rank's slice).
std::map<std::string, std::uint64_t> predict_model_states(const ModelConfig& cfg, const ZeroOptions& zero,
                                                          Precision precision, int tensor = 1);

// One rank without sequence parallelism (category -> bytes), opts.offload.alpha sizing everything.
std::map<std::string, std::uint64_t> predict_memory(const ModelConfig& cfg, const ModelOptions& opts,
                                                    std::int64_t seq_len, Precision precision);

}  // namespace minilst
