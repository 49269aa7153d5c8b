// The analytic memory model of one rank's training step: the bytes each tracked
// category reaches at its high-water mark, without running or allocating
// anything, for any shape, policy, chunking and parallel layout. It replays the
// step's allocation sequence from the shapes alone: the buffers the code
// allocates and frees, in the code's order (read next to model.cpp,
// memory/activation_store.cpp, decoder_layer.cpp, mlp_block.cpp, lm_head.cpp and
// the attention strategies in src/attention/), so its high-waters are exact, and
// the same replay gives the step's buffer trace, whose plan is the arena a
// planned run allocates (step_arena.hpp). Tests hold measured and predicted equal
// to the byte, category by category, on every layout they run.
//   S local tokens, d hidden, Hh = H*h, Gh = G*h, I intermediate, V vocab,
//   T scalar bytes, A accumulator bytes. Per rank and step:
//   persistent   weights = gradients = P T, optimizer 2 P T; positions 8 S (workspace);
//                ring: the positions of every block; Ulysses: the group's positions
//   per micro-step: tokens, labels (8 S each), dx, dx_in [S, d]; the activation store's
//                buffers (x [S, d]; q, k, v, o, stats, y per saved set; how many and for how
//                long by policy); per layer the attention input [S, d], the attention's
//                buffers (Ulysses: all-to-all send/receive, head-sharded q, k, v, o and their
//                gradients; ring: two K/V blocks, output and lse accumulators, dK/dV
//                accumulators; rsa: the [Hl*Sq, S] scores), MLP chunks (C_m (d + 2I) forward,
//                C_m (d + 3I) backward), the layer backward's dy, dO, dq, dk, dv, D; the LM
//                head's chunks C_h (d + V)
//   host_offload the offload kinds' host copies, kept across steps (memory_model.cpp)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "memory/planner.hpp"
#include "model/config.hpp"
#include "parallel/parallel_config.hpp"
#include "parallel/sequence_layout.hpp"

namespace minilst {

struct MemoryPrediction {
  std::map<std::string, std::uint64_t> bytes;  // category -> high-water (+ device_total)
  std::vector<TraceBuffer> trace;              // the step's buffers (the planner's input)
  std::vector<TraceSegment> segments;
};

// One rank (sp rank `sp_rank` of `layout`) of a run with this parallel
// configuration: grad_accum micro-steps of one step. host_alpha: the largest
// offload alpha of the run (it sizes the host buffers); opts.offload.alpha: the
// step's.
MemoryPrediction predict_rank_memory(const ModelConfig& cfg, const ModelOptions& opts, const ParallelConfig& par,
                                     const SequenceLayout& layout, int sp_rank, int grad_accum,
                                     std::size_t scalar_bytes, std::size_t accum_bytes, double host_alpha);

// One rank without sequence parallelism (category -> bytes), opts.offload.alpha sizing everything.
std::map<std::string, std::uint64_t> predict_memory(const ModelConfig& cfg, const ModelOptions& opts,
                                                    std::int64_t seq_len, std::size_t scalar_bytes,
                                                    std::size_t accum_bytes);

// Host bytes the offload kinds keep per rank (0 for the others):
//   checkpoint_offload (L-1) S d T;  offload (L-1) S d T + (L-2) (S Hh T + stats A + r (Hh + 2Gh + d) T),
//   r = round(alpha S), stats = the attention statistics' elements (S H locally)
std::uint64_t predict_host_offload(const ModelConfig& cfg, MemoryPolicy policy, double alpha, std::int64_t seq_len,
                                   std::size_t scalar_bytes, std::size_t accum_bytes);
// The bytes one layer moves to host in offload: x, o + lse, and q, k, v, y of all S tokens.
struct OffloadLayerBytes {
  double x = 0, o = 0, rest = 0;
};
OffloadLayerBytes offload_layer_bytes(const ModelConfig& cfg, std::int64_t seq_len, std::size_t scalar_bytes,
                                      std::size_t accum_bytes);

}  // namespace minilst
