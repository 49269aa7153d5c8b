// The analytic communication volume of one training step: bytes this rank sends
// to other ranks, per operation, derived from the algorithms (not from the code
// that sends), so the metrics can be checked against it.
//   S_l this rank's tokens, S_g its Ulysses group's, n_b ring block b's tokens,
//   q = H/U heads per member, k = kv heads per member (G/U, or 1 when replicated),
//   T bytes of an activation element (2 in bf16), per layer and micro-step:
//   alltoall (Ulysses)  forward   (S_l (U-1)/U)-style scatters: S_l h T [(U-1) q + 2 (U-1) k] + gather o (S_g - S_l) q h T
//                       backward  scatter dO; gather dQ, dK, dV (Q, K, V, O kept head-sharded):
//                                 the forward's bytes when the shards are equal
//   ring                reach_b: the last ring step at which some member sees block b (its hop
//                       distance from b to its farthest visitor; R - 1 when every member sees
//                       every block, as under a causal mask with zigzag; parallel/ring_reach.hpp)
//                       forward   flash: the blocks a later member sees, sum over hops t < reach_b
//                                 (b = me - t) of 2 n_b k h T (K and V together); RSA: every block
//                                 but the last visitor's, sum_{b != me+1} 2 n_b k h T (a pass of K,
//                                 a pass of V)
//                       backward  flash (and RSA with parallel.rsa_backward flash): the forward's
//                                 K/V, plus the dK/dV accumulators up to each block's last visitor
//                                 (then home): sum over t <= reach_b, reach_b > 0, of 2 n_b k h T;
//                                 RSA's seed backward: a pass of V, a pass of K, as RSA's forward
//                       per layer under its mask (a window in some layers: each kind counted)
//   rsa_allreduce       RSA's seed backward: ring all-reduces of the dK and dV partials [S, k h]
//                       in the accumulation type (A bytes: 4 under bf16 and float, 8 in double);
//                       each sends every chunk (block) but its own, then every chunk but its
//                       successor's: 2 [(S - n_me) + (S - n_{me+1})] k h A, i.e. 2 x 2 (R-1)/R of
//                       [S, k h] with equal blocks. With equal blocks the seed's backward sends
//                       2 (R-1) (S/R) k h T + 4 (R-1) (S/R) k h A: the paper's 6 (N-1) B Z (L/N) A
//                       elements (Z heads of head size A there) when T = A.
//   checkpoint: the recomputed forward attention sends its forward volume again.
//   allreduce           ZeRO 0, 1: the gradient, padded (n x 4 bytes, fp32 also under bf16; 8 in double),
//                       when the world has > 1 rank
//   reduce_scatter      ZeRO 2, 3, per micro-step: every unit's gradient, (P - 1) s_u x 4 bytes (s_u: its shard)
//   allgather           ZeRO 1, 2: every unit's weights after AdamW, (P - 1) s_u x W bytes (W: 2 in bf16);
//                       ZeRO 3: each micro-step's units of unit_gather_order (model_states.hpp)
//   grad_norm           ZeRO 2, 3: the gradient's square sum, 8 bytes (8 more over the tensor-parallel group)
//   tp_allgather, tp_reduce_scatter, tp_grad_sum   tensor parallelism (comm_model.cpp,
//                       add_tensor_parallel): the sequence's gathers and reduce-scatters around
//                       each block, the replicated parameters' gradient sums
// Under tensor parallelism (parallel.tensor = TP) the model above is one rank's slice and P
// counts the ranks holding the same slice (world / TP).
// (collectives of P ranks count what a ring algorithm sends per rank: (P - 1) blocks)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/comm_ops.hpp"
#include "core/config.hpp"
#include "core/parallel_config.hpp"
#include "parallel/sequence_layout.hpp"

namespace minilst {

struct AttentionGeometry;

// One layer's ring bytes on this rank (per micro-step): K/V blocks forward and
// backward (T bytes an element), and RSA's seed all-reduces (acc bytes an element).
// reach: ring_reach of the layer's mask ([R]; empty: every block visits every member).
struct RingLayerBytes {
  std::uint64_t forward = 0, backward = 0, allreduce = 0;
};
RingLayerBytes ring_layer_bytes(const AttentionGeometry& g, const std::vector<int>& reach, std::uint64_t T,
                                std::uint64_t acc);

CommBytes predict_comm_bytes(const ModelConfig& cfg, const ModelOptions& opts, const ParallelConfig& par,
                             const SequenceLayout& layout, int sp_rank, int world_size, int grad_accum, Precision precision,
                             const ZeroOptions& zero = ZeroOptions{});

// Whether a run of this layout and ZeRO stage sends anything under `op` at all (what `minilst plan`
// lists): alltoall, ring and allreduce always; rsa_allreduce with RSA's seed backward; the
// reduce-scatters, gathers and the norm's sum under ZeRO.
bool comm_op_used(CommOp op, const ParallelConfig& par, int zero_stage);

}  // namespace minilst
