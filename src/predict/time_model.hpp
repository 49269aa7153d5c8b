// The analytic time of one training step on a machine described by its rates (a machine file:
// predict/machine_rates.hpp, docs/time_model.md), per phase as the run's timers name them
// (core/phases.hpp). Everything is per rank, for the busiest sequence-parallel rank, and per step
// (every micro-step of run.grad_accum summed, as the run's timers accumulate them). One function
// per phase family, each in time_*.cpp beside the code it prices; predict_step_time adds them up.
//
// Notation: S_l the rank's tokens, d hidden, Hh = H h, Gh = G h, I intermediate, V vocab, L layers,
// T bytes of an activation element, A micro-steps; heads here: q = H/U, k = G/U. Rates per rank:
// R_gemm[class] (GFLOP/s of the run's precision), R_fwd / R_bwd (the attention kernel), B_el
// (elementwise GB/s), B_copy (host link), links (a call: latency + sync + bytes / bandwidth),
// t_op (per kernel call). k_f: the machine's step_scale of family f (1 where absent).
//
//   price_layer (per layer, per micro-step; the `other` family: projections, norms, RoPE)
//     proj_fwd   k_other [2 S_l (d Hh + 2 d Gh + Hh d) / R_proj + T S_l (6 d + 2 (Hh + Gh)) / B_el + 8 t_op]
//     proj_bwd   k_other [2x the FLOPs / R_proj + 2x the bytes / B_el + 14 t_op]
//     mlp_fwd    k_mlp [2 S_l 3 d I / R_mlp + T S_l (3 I + 4 d) / B_el + 5 M t_op]        (M: MLP chunks)
//     mlp_bwd    k_mlp [(4 S_l 3 d I + recompute 2 S_l 2 d I) / R_mlp
//                       + T S_l (5 I + 3 I (recomputed) + 6 d) / B_el + 10 M t_op]        (no recompute when saved)
//   price_attention (per layer, per micro-step)
//     every sequence-parallel rank's visible pairs with each ring block x q h: 4 FLOPs each
//     forward / R_fwd, 10 backward / R_bwd, + 2 t_op, x k_attention x the tiles' padding; the
//     ring's members run in lockstep: hop t lasts max(the slowest member's block, the hop's
//     transfer) (their sum without parallel.ring_overlap) + p2p sync where the hop sends anything;
//     a layer's attention = max(the busiest member's compute, the passes); ring_wait = the idlest
//     member's wait; RSA's seed backward adds its two all-reduces of dK, dV
//   price_alltoall (per step): Ulysses' calls, each latency + sync, plus bytes / B_alltoall
//     (bytes: the communication model's alltoall), A L (4 x passes + 4 + 4 when offload re-derives);
//     passes = 2 where the attention is recomputed; with N head chunks (2N + 2K) per pass and
//     backward (K = N where the chunks split the kv heads, else 1), and on a device the first N - 1
//     chunks' gathers of o and dQ (dK, dV) hidden behind the next chunk's attention
//     (a machine file's framework.layer_bytes replace the byte counts: proj S_l (hidden d + heads
//     (Hh + Gh)), mlp S_l intermediate I, the backward 2x (3x with the MLP's recompute))
//   price_lm_head (per micro-step)  k_lm_head [6 S_l d V / R_lm_head + 4 T S_l V / B_el + 8 M_head t_op]
//     (framework.lm_head_bytes replaces 4 T; framework.optimizer_bytes the optimizer's bytes)
//   price_recompute (per layer, per micro-step): checkpointing redoes the attention block
//     (proj_fwd + the attention's forward); offload redoes the (1 - alpha) rows not in host
//     memory of the layers whose row buffer was reused: rows (proj_fwd + mlp_fwd when saved)
//   price_offload (per step): copy = host bytes / L / B_copy per layer; wait = A [L max(0, copy -
//     forward compute) + L max(0, copy - backward compute) + copy]; the copy engine busy 2 A bytes / B_copy
//   price_states (per step, over every rank P): ZeRO 0, 1 the all-reduce (comm and grad_reduce);
//     ZeRO 2, 3 reduce-scatters per unit, exposed past the backward's compute, the last one's in comm;
//     ZeRO 1, 2 all-gathers after AdamW (in comm); ZeRO 3 all-gathers beside the units' compute
//     (param_gather: the exposed part + the first call)
//   price_optimizer (per step)  k_optimizer [n bytes_per_element / B_opt + 4 t_op] (28 bytes fp32,
//     30 bf16, 56 double; B_opt: optimizer_gbs, else B_el) + optimizer offload: n (4 + T) / B_host
//   price_tensor (per step; tensor parallelism, TP ranks: the model above is one rank's slice,
//     S_l the group's rows): the comm model's tp_allgather and tp_reduce_scatter bytes over the
//     link of TP ranks, a call per block each way (per layer and micro-step: gathers passes + M
//     (1 + 1 or 2 where the MLP recomputes) + 2, reduce-scatters passes + 2 M + 1; the head 2 and 1
//     per chunk; the embedding 1 and 1), every call exposed (each sits between the compute it
//     feeds); tensor_comm, and inside mlp and lm_head for theirs; tp_grad_sum in comm (ZeRO 0, 1)
//     or the backward (2, 3). price_states's P: the ranks holding one slice.
//   predict_step_time
//     forward  = A (L (proj_fwd + attention_fwd + mlp_fwd) + lm_head + 2 t_op) + alltoall's forward
//                share + half of param_gather + tensor_comm's forward calls
//     backward = A (L (proj_bwd + attention_bwd + mlp_bwd + recompute) + 2 t_op) + the rest of the
//                alltoall + offload_wait + half of param_gather + the reduce-scatters' exposed part
//                (the LM head's backward is fused in its forward and counted there)
//     step     = forward + backward + comm + optimizer
//   tokens/s = S D A / step; MFU = FLOPs / (step P peak) in each convention (flops.hpp; peak: the
//   file's mfu_peak)
#pragma once

#include <cstdint>

#include "attention/attention_geometry.hpp"
#include "core/comm_ops.hpp"
#include "core/config.hpp"
#include "core/parallel_config.hpp"
#include "core/phases.hpp"
#include "memory/activation_store.hpp"
#include "parallel/sequence_layout.hpp"
#include "predict/flops.hpp"
#include "predict/machine_rates.hpp"

namespace minilst {

// What the step is, for one rank (the busiest one of a plan): what the time model prices.
struct PricedStep {
  ModelConfig model;
  ModelOptions options;  // policy, alpha, chunk counts (resolved)
  ParallelConfig parallel;
  Precision precision = Precision::float32;
  int grad_accum = 1, world = 1, sp_rank = 0;
  std::int64_t seq_len = 0;
  SequenceLayout layout{1, 1, 1, RingLayout::zigzag, false};
  CommBytes comm;                             // bytes this rank sends per step, per op (comm_model)
  std::uint64_t offload_bytes = 0;            // activations in host memory (memory model's host_offload)
  std::uint64_t optimizer_elements = 0;       // AdamW elements this rank updates (its shard)
  bool optimizer_on_host = false;             // memory.optimizer_offload: AdamW on the host's memory
  StepFlops flops{};                          // the step's FLOPs in MFU's conventions, every rank (flops.hpp)
};

// The phases the time model prices; the others are measured only (the background time of posted
// reduce-scatters and gathers, the prefetch's part of offload_wait).
constexpr bool priced_phase(Phase p) {
  return p != Phase::grad_reduce_overlap && p != Phase::param_gather_overlap && p != Phase::prefetch_wait;
}

struct StepTime {
  PhaseSeconds phases{};  // seconds per step, per phase (the run's /timings)
  double step_s = 0, tokens_per_s = 0;
  EnumMap<FlopsConvention, double> mfu{};  // per convention (flops.hpp), over the machine's MFU peak
  double mfu_peak_gflops = 0;              // that peak, per rank
};

// What every phase family's price reads: the shape's sizes, this rank's geometry, the rates.
struct PriceContext {
  const PricedStep& step;
  const MachineRates& m;
  AttentionGeometry g;
  Precision p;
  double T, A, L, d, h, Hh, Gh, I, V, S_l;  // notation above
  double t_op, B_el;                        // s per kernel call; bytes/s elementwise
  StoreBuffers store;                       // what the policy keeps (memory/activation_store.hpp)
  int mlp_chunks = 1, head_chunks = 1;
  std::int64_t residual = 0;                // n: the residual rows (S_l / TP)
};
PriceContext price_context(const PricedStep& step, const MachineRates& m);
// Offload's token-wise recompute in this step (memory/activation_store.hpp).
TokenRecompute token_recompute(const PriceContext& c);

struct LayerPrice {  // s per layer and micro-step
  double proj_fwd = 0, proj_bwd = 0, mlp_fwd = 0, mlp_bwd = 0;
};
LayerPrice price_layer(const PriceContext& c);

struct AttentionPrice {  // s per layer and micro-step
  double fwd = 0, bwd = 0;                // the lockstep passes (RSA's all-reduces in bwd)
  double ring_wait_fwd = 0, ring_wait_bwd = 0;
};
AttentionPrice price_attention(const PriceContext& c);

struct AlltoallPrice {  // s per step
  double total = 0, forward_share = 0;  // forward_share: the part of total in the forward pass
  // Head chunks on a device (NCCL's stream): the bytes time of the chunk gathers that move while
  // the next chunk attends (all but the last chunk's o, dQ, and dK, dV where chunked), hidden up
  // to the attention's own time (add_up caps it); 0 on hosts, whose MPI moves them at the wait.
  double overlappable = 0;
};
AlltoallPrice price_alltoall(const PriceContext& c);

double price_lm_head(const PriceContext& c);  // s per micro-step

struct RecomputePrice {  // s per layer and micro-step
  double layer = 0, attention = 0, mlp = 0;
};
RecomputePrice price_recompute(const PriceContext& c, const LayerPrice& layer, const AttentionPrice& attention);

struct OffloadPrice {  // s per step
  double wait = 0, copy_engine_busy = 0;
};
OffloadPrice price_offload(const PriceContext& c, double forward_layer, double backward_layer);

struct StatesPrice {  // s per step
  double comm = 0, allreduce = 0, grad_reduce = 0, last_reduce_scatter = 0, gather_beside = 0, gather_after = 0;
};
// forward, backward: the compute of a micro-step the ZeRO 3 gathers and reduce-scatters hide behind.
StatesPrice price_states(const PriceContext& c, double forward, double backward);

double price_optimizer(const PriceContext& c);  // s per step

struct TensorPrice {  // s per step
  double total = 0, forward = 0, mlp = 0, lm_head = 0, grad_sum = 0;  // grad_sum: part of total
};
TensorPrice price_tensor(const PriceContext& c);

StepTime predict_step_time(const PricedStep& step, const MachineRates& machine);

// A step's seconds per phase family (step_scale): attention, mlp, lm_head and optimizer are their
// phases; other is forward + backward less attention, mlp and lm_head (projections, norms, RoPE,
// residuals, the embedding). The probe's calibration step divides the measured by the priced.
EnumMap<PhaseFamily, double> family_seconds(const PhaseSeconds& phases);

}  // namespace minilst
