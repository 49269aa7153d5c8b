// The analytic communication volume of one training step: bytes this rank sends
// to other ranks, per operation, derived from the algorithms (not from the code
// that sends), so the metrics can be checked against it.
//   S_l this rank's tokens, S_g its Ulysses group's, n_b ring block b's tokens,
//   q = H/U heads per member, k = kv heads per member (G/U, or 1 when replicated),
//   T bytes of an activation element (2 in bf16), per layer and micro-step:
//   alltoall (Ulysses)  forward   (S_l (U-1)/U)-style scatters: S_l h T [(U-1) q + 2 (U-1) k] + gather o (S_g - S_l) q h T
//                       backward  scatter dO, O, Q, K, V; gather dQ, dK, dV
//   ring                forward   every block but the last visitor's: sum_{b != me+1} 2 n_b k h T
//                       backward  the same for K/V, plus every block's dK/dV: sum_b 2 n_b k h T
//   checkpoint: the recomputed forward attention sends its forward volume again.
//   allreduce           ZeRO 0, 1: the gradient, padded (n x 4 bytes, fp32 also under bf16; 8 in double),
//                       when the world has > 1 rank
//   reduce_scatter      ZeRO 2, 3, per micro-step: every unit's gradient, (P - 1) s_u x 4 bytes (s_u: its shard)
//   allgather           ZeRO 1, 2: every unit's weights after AdamW, (P - 1) s_u x W bytes (W: 2 in bf16);
//                       ZeRO 3: each micro-step's units of unit_gather_order (model_states.hpp)
//   grad_norm           ZeRO 2, 3: the gradient's square sum, 8 bytes
// (collectives of P ranks count what a ring algorithm sends per rank: (P - 1) blocks)
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/config.hpp"
#include "core/parallel_config.hpp"
#include "parallel/sequence_layout.hpp"

namespace minilst {

std::map<std::string, std::uint64_t> predict_comm_bytes(const ModelConfig& cfg, const ModelOptions& opts,
                                                        const ParallelConfig& par, const SequenceLayout& layout,
                                                        int sp_rank, int world_size, int grad_accum,
                                                        Precision precision, const ZeroOptions& zero = ZeroOptions{});

}  // namespace minilst
