// A machine's rates per rank: what the time model (predict/time_model.hpp) needs of a machine
// file (predict/machine_file.hpp reads and writes them; predict/machine_keys.hpp names each
// key once). Every table is indexed by enums, so a rate that does not exist does not compile.
//   rates.gemm(Precision::bf16, GemmClass::mlp)   GFLOP/s; throws naming the missing key
// (the accessors are defined in machine_keys.cpp, beside the table that names the keys).
#pragma once

#include <string>

#include "core/config.hpp"
#include "core/names.hpp"

namespace minilst {

// The GEMM shape classes a machine file rates (tokens x out x in): square n^3, projection
// (tall: the q/k/v/o products), mlp (an intermediate that is not a power of two), lm_head.
enum class GemmClass { square, projection, mlp, lm_head };
template <>
struct EnumNames<GemmClass> {
  static constexpr std::array<std::pair<GemmClass, const char*>, 4> table{{{GemmClass::square, "square"},
                                                                           {GemmClass::projection, "projection"},
                                                                           {GemmClass::mlp, "mlp"},
                                                                           {GemmClass::lm_head, "lm_head"}}};
};

enum class AttentionPass { forward, backward };
template <>
struct EnumNames<AttentionPass> {
  static constexpr std::array<std::pair<AttentionPass, const char*>, 2> table{
      {{AttentionPass::forward, "forward"}, {AttentionPass::backward, "backward"}}};
};

// The families of phases a calibration step scales (step_scale): attention, the MLP, the LM
// head, optimizer, and other: the projections, norms, RoPE, residuals and embedding.
enum class PhaseFamily { attention, mlp, lm_head, other, optimizer };
template <>
struct EnumNames<PhaseFamily> {
  static constexpr std::array<std::pair<PhaseFamily, const char*>, 5> table{{{PhaseFamily::attention, "attention"},
                                                                             {PhaseFamily::mlp, "mlp"},
                                                                             {PhaseFamily::lm_head, "lm_head"},
                                                                             {PhaseFamily::other, "other"},
                                                                             {PhaseFamily::optimizer, "optimizer"}}};
};

enum class LinkScope { intra_node, inter_node };
template <>
struct EnumNames<LinkScope> {
  static constexpr std::array<std::pair<LinkScope, const char*>, 2> table{
      {{LinkScope::intra_node, "intra_node"}, {LinkScope::inter_node, "inter_node"}}};
};

enum class LinkOp { p2p, alltoall, allreduce, allgather, reduce_scatter };
template <>
struct EnumNames<LinkOp> {
  static constexpr std::array<std::pair<LinkOp, const char*>, 5> table{{{LinkOp::p2p, "p2p"},
                                                                        {LinkOp::alltoall, "alltoall"},
                                                                        {LinkOp::allreduce, "allreduce"},
                                                                        {LinkOp::allgather, "allgather"},
                                                                        {LinkOp::reduce_scatter, "reduce_scatter"}}};
};

// A link for one collective: a call costs latency_us + sync_us + bytes / (gbs 1e9); sync_us: the
// wait for the other ranks when the call follows compute (their skew; ranks sharing cores wait
// for a paused peer), 0 where not measured. gbs 0: the file has no such link.
struct LinkRate {
  double gbs = 0, latency_us = 0, sync_us = 0;
  // `calls` messages of `bytes` in all: calls (latency + sync) + bytes / bandwidth, seconds
  double seconds(double bytes, double calls = 1) const {
    return calls * (latency_us + sync_us) * 1e-6 + bytes / (gbs * 1e9);
  }
};

struct MachineRates {
  std::string name;
  int ranks_per_node = 1;  // ranks that share the intra-node links
  // GFLOP/s of dense GEMMs by precision and shape class (0: absent)
  EnumMap<Precision, EnumMap<GemmClass, double>> gemm_gflops{};
  // useful GFLOP/s of causal flash attention by precision and pass (0: absent)
  EnumMap<Precision, EnumMap<AttentionPass, double>> attention_gflops{};
  // The attention figures' problem (attention_probe): query heads per kv head and head dim
  // (0: not recorded, as in nominal files), and per precision the kernel that ran.
  int attention_heads_per_kv = 0, attention_head_dim = 0;
  EnumMap<Precision, std::string> attention_kernel{};
  // The same kernel timed at a second head dim (attention_probe.second_head_dim; 0: not timed) and
  // its rates there: with two points a pass's time per causal pair and q head is c0 + c1 h (the
  // softmax's work per pair, the products' per head dim), which prices every head dim.
  int attention_second_head_dim = 0;
  EnumMap<Precision, EnumMap<AttentionPass, double>> attention_second_gflops{};
  // a training step's time over the same phases priced from the isolated rates, by precision
  // and phase family (the probe's calibration step); 0: absent (1)
  EnumMap<Precision, EnumMap<PhaseFamily, double>> step_scale{};
  // the same with one rank of the node at work and the others idle (0: absent): a run of fewer
  // ranks per node than ranks_per_node is priced between the two (at_busy_ranks)
  EnumMap<Precision, EnumMap<PhaseFamily, double>> step_scale_alone{};
  double elementwise_gbs = 0;  // a streaming kernel's bytes read + written per second
  double optimizer_gbs = 0;    // AdamW's bytes per second over the model states (0: elementwise_gbs)
  double op_overhead_us = 0;   // per kernel call (launch, fence, dispatch)
  // The elementwise traffic of the training software the figures describe, where it is not
  // miniLST's own kernels (a paper's framework); 0: miniLST's (time_compute.cpp). Bytes per token:
  // one layer's forward per hidden unit, per q or kv head dim (Hh + Gh), per intermediate unit
  // (the backward moves twice the forward's); the loss per vocabulary entry (forward + backward);
  // the optimizer per parameter.
  struct FrameworkBytes {
    double hidden = 0, heads = 0, intermediate = 0, lm_head = 0, optimizer = 0;
  } framework;
  std::string framework_name;  // "" : miniLST
  double host_link_gbs = 0;    // the copy engine's host <-> device bytes per second (each way)
  bool host_same_memory = false;  // a host build: "offload" copies within one memory
  EnumMap<LinkScope, EnumMap<LinkOp, LinkRate>> links{};
  // MFU's denominator per rank: a nominal file's spec peak (nominal.gemm_gflops), else (0) the
  // measured square GEMM (as a run's MFU, results/gemm_peak.hpp)
  EnumMap<Precision, double> mfu_peak_gflops{};

  // The rate; throws std::runtime_error naming the machine-file key when absent.
  double gemm(Precision p, GemmClass c) const;
  double attention(Precision p, AttentionPass pass) const;
  double mfu_peak(Precision p) const;
  double scale(Precision p, PhaseFamily f) const;  // step_scale, 1 where absent
  // These rates for a run that keeps `busy` ranks of a node at work: step_scale moved linearly
  // from step_scale_alone (1 rank) to step_scale (ranks_per_node), where the file has both.
  MachineRates at_busy_ranks(int busy) const;
  // The attention kernel's time per useful FLOP for a problem of `heads_per_kv` and `head_dim`,
  // over the probed problem's: the head dim's by the two-point model above where the file has a
  // second head dim's rates, else by the portable kernel's padded tiles (kernels/attention_tiles.hpp);
  // the heads per kv head's by the tiles; 1 where the file does not record the probed problem.
  double attention_padding(Precision p, AttentionPass pass, int heads_per_kv, int head_dim) const;
  // The link of `op` among a group of `ranks` members `stride` ranks apart in rank order (tensor
  // parallel innermost, then Ulysses, ring, data parallel): intra_node when the ranks * stride ranks
  // it spans fit on one node, else inter_node (a ring of 2 behind a TP 8 group crosses nodes).
  LinkRate link(LinkOp op, int ranks, int stride = 1) const;
};

}  // namespace minilst
