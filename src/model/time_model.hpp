// The analytic time of one training step on a machine described by its rates (a machine
// file: docs/time_model.md), per phase as the run's timers name them (core/phases.hpp).
// Everything is per rank, for the busiest sequence-parallel rank, and per step (every
// micro-step of run.grad_accum summed, as the run's timers accumulate them).
//
// Notation: S_l the rank's tokens, S_g its Ulysses group's, d hidden, Hh = H h, Gh = G h,
// I intermediate, V vocab, L layers, T bytes of an activation element, A micro-steps;
// heads here: q = H/U, k = G/U. Rates per rank: R_gemm[class] (GFLOP/s of the run's
// precision), R_fwd / R_bwd (the attention kernel), B_el (elementwise GB/s),
// B_copy (host link), links (latency t0 + sync after compute + bytes / bandwidth), t_op (per kernel call).
//
//   projections  forward 2 S_l (d Hh + 2 d Gh + Hh d) / R_gemm[projection]; backward 2x
//   mlp          forward 2 S_l 3 d I; backward 4 S_l 3 d I + the gate/up recompute 2 S_l 2 d I,
//                over R_gemm[mlp]; SwiGLU and the residual: bytes / B_el
//   attention    the rank's causal pairs x q h: forward 4, backward 10 FLOPs each, / R_fwd, R_bwd;
//                Ulysses: its all-to-alls exposed (t0 + sync + bytes / B_alltoall each);
//                ring: the members in lockstep, hop by hop max(the slowest member's block
//                compute, the hop's transfer) (ring_pass posts the next hop before computing
//                the current block and waits for both neighbours), plus the p2p sync where the
//                hop exchanges anything; ring_wait the idlest member's excess (contiguous: the
//                first members wait for the last)
//   lm_head      2 S_l d V forward, 4 S_l d V backward / R_gemm[lm_head] + the softmax's bytes / B_el
//   recompute    the policies that drop the saved attention run each layer's attention block again (not the MLP)
//   offload_wait the copy engine moves a layer's rows while the next layer computes:
//                max(0, copy - compute) per layer, both ways
//   comm         ZeRO 0, 1: the gradient's all-reduce, t0 + bytes / B_allreduce
//   grad_reduce  ZeRO 2, 3: reduce-scatters on their stream, exposed past the backward; ZeRO 0, 1: the
//                all-reduce of comm (the run times its wait under both names)
//   param_gather ZeRO 1, 2: all-gathers after AdamW; 3: per unit beside the layers' compute
//   optimizer    AdamW streams every element of its shard's states: 28 bytes (fp32) / B_opt
//   step         A (forward + backward) + comm + optimizer + param_gather (ZeRO 1, 2)
//   scaling      each compute term x the machine's step_scale of its family (attention, mlp,
//                lm_head, other: projections and elementwise, optimizer); attention also x the
//                portable kernel's tile padding for this problem over the probed one's
// Each formula sits beside its code in time_model.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/config.hpp"
#include "core/parallel_config.hpp"
#include "parallel/sequence_layout.hpp"

namespace minilst {

// A link for one collective: a call costs latency_us + sync_us + bytes / (gbs 1e9); sync_us: the
// wait for the other ranks when the call follows compute (their skew; ranks sharing cores wait
// for a paused peer), 0 where not measured.
struct LinkRate {
  double gbs = 0, latency_us = 0, sync_us = 0;
};

// A machine's rates, per rank (what time_model needs of a machine file; app/machine_file reads them).
struct MachineRates {
  std::string name;
  int ranks_per_node = 1;  // ranks that share the intra-node links
  // precision ("float", "bf16", "double") -> shape class ("square", "projection", "mlp", "lm_head") -> GFLOP/s
  std::map<std::string, std::map<std::string, double>> gemm_gflops;
  // precision -> forward, backward GFLOP/s of causal flash attention
  std::map<std::string, std::map<std::string, double>> attention_gflops;
  double elementwise_gbs = 0;  // a streaming kernel's bytes read + written per second
  double optimizer_gbs = 0;    // AdamW's bytes per second over the model states (0: elementwise_gbs)
  double op_overhead_us = 0;   // per kernel call (launch, fence, dispatch)
  double host_link_gbs = 0;    // the copy engine's host <-> device bytes per second (each way)
  bool host_same_memory = false;  // a host build: "offload" copies within one memory
  // scope ("intra_node", "inter_node") -> op ("p2p", "alltoall", "allreduce", "allgather", "reduce_scatter")
  std::map<std::string, std::map<std::string, LinkRate>> links;
  // The attention figures' problem (attention_probe): query heads per kv head and head dim
  // (0: not recorded, as in nominal files), and per precision the kernel that ran.
  int attention_heads_per_kv = 0, attention_head_dim = 0;
  std::map<std::string, std::string> attention_kernel;
  // precision -> phase family ("attention", "mlp", "lm_head", "other", "optimizer") -> a
  // training step's time over the same phase priced from the isolated rates (the probe's
  // calibration step: what caches, dispatch and the kernels between the timed ones add); absent: 1
  std::map<std::string, std::map<std::string, double>> step_scale;
  // precision -> MFU's denominator per rank: a nominal file's spec peak (nominal.gemm_gflops),
  // else the measured square GEMM (as a run's MFU, results/gemm_peak.hpp)
  std::map<std::string, double> mfu_peak_gflops;

  // The rate for a precision and class; throws naming the machine-file key when absent.
  double gemm(Precision p, const std::string& shape_class) const;
  double attention(Precision p, const std::string& direction) const;
  double mfu_peak(Precision p) const;
  double scale(Precision p, const std::string& family) const;  // step_scale, 1 where absent
  // The attention kernel's work per useful FLOP for a problem of `heads_per_kv` and `head_dim`,
  // over the probed problem's (the portable kernel's padded tiles, kernels/attention_tiles.hpp); 1
  // where the file does not record the probed problem or another kernel ran.
  double attention_padding(Precision p, int heads_per_kv, int head_dim) const;
  // The link of `op` among `ranks` ranks: intra_node when they fit on one node, else inter_node.
  LinkRate link(const std::string& op, int ranks) const;
};

// What the step is, for one rank (the busiest one of a plan).
struct StepShape {
  ModelConfig model;
  ModelOptions options;   // policy, alpha, chunk counts (resolved)
  ParallelConfig parallel;
  Precision precision = Precision::float32;
  int grad_accum = 1, world = 1, sp_rank = 0;
  std::int64_t seq_len = 0;
  SequenceLayout layout{1, 1, 1, RingLayout::zigzag, false};
  std::map<std::string, std::uint64_t> comm;    // bytes this rank sends per step, per op (comm_model)
  std::uint64_t offload_bytes = 0;              // activations in host memory (memory model's host_offload)
  std::uint64_t optimizer_elements = 0;         // AdamW elements this rank updates (its shard)
  bool optimizer_on_host = false;               // memory.optimizer_offload: AdamW on the host's memory
  double model_flops = 0;                       // model FLOPs of the step, every rank (flops.hpp)
};

struct StepTime {
  std::map<std::string, double> phases;  // phase name -> seconds per step (the run's /timings names)
  double step_s = 0, tokens_per_s = 0, mfu = 0;
};

StepTime predict_step_time(const StepShape& shape, const MachineRates& machine);

}  // namespace minilst
