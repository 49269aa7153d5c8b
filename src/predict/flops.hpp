// FLOP counts, in one place.
//
// Model FLOPs of one training step (the MFU convention: what the model needs,
// not what this implementation spends; recomputation is not counted).
//   forward per sequence of S tokens:
//     matmuls    2 S [ L (d*Hh + 2 d*Gh + Hh*d + 3 d*I) + d*V ]      (Hh = H*h, Gh = G*h)
//     attention  L * 4 Hh * S(S+1)/2   (q.k and p.v over the causal context of each query)
//   training = 3 x forward (backward = 2 x forward), times grad_accum sequences.
//
// Per phase, forward + backward of one sequence (the step benchmark's roofline):
//   attention    flash-attention count over the S(S+1)/2 causal pairs, per pair and
//                head dim: forward q.k, p.v (4), backward the recomputed scores,
//                dV, dP, dQ, dK (10): 14 Hh S(S+1)/2 per layer (forward 2 S^2 Hh,
//                backward 5 S^2 Hh for large S)
//   projections  3 x 2 S (d Hh + 2 d Gh + Hh d) per layer (q, k, v, o)
//   mlp          3 x 2 S (3 d I) per layer (the backward's gate/up recompute not counted)
//   lm_head      3 x 2 S d V
//
// MFU's three conventions (FlopsConvention), each over the datasheet's dense peak of the run's
// precision, each labelled wherever an MFU is printed or stored:
//   model     the model's FLOPs above: causal attention as S(S+1)/2 pairs, recomputation not
//             counted (PaLM's MFU; MEMO's 6 s P + 6 n h s^2 per sample)
//   hardware  model + what this implementation computes again: checkpointing's attention block
//             (norm, q/k/v/o projections, attention forward), the MLP's gate/up in its backward
//             where its chunk is not kept, offload's recomputed token rows (memory.policy's rules)
//   square    hardware with attention as the full S^2 square (not halved for the causal mask):
//             Megatron-LM's 96 B s l h^2 (1 + s / 6h + V / 16 l h) under full recompute, which
//             ALST's and FlashAttention-2's end-to-end TFLOPS count
#pragma once

#include "core/config.hpp"
#include "core/names.hpp"

namespace minilst {

enum class FlopsConvention { model, hardware, square };
template <>
struct EnumNames<FlopsConvention> {
  static constexpr std::array<std::pair<FlopsConvention, const char*>, 3> table{
      {{FlopsConvention::model, "model"}, {FlopsConvention::hardware, "hardware"}, {FlopsConvention::square, "square"}}};
};
using StepFlops = EnumMap<FlopsConvention, double>;
// What each convention counts, in words (for the labels of printed MFUs).
inline const char* convention_text(FlopsConvention c) {
  switch (c) {
    case FlopsConvention::model: return "model FLOPs: causal attention halved, recompute not counted";
    case FlopsConvention::hardware: return "hardware FLOPs: causal attention halved, recompute counted";
    case FlopsConvention::square: break;
  }
  return "square attention: attention as the full S^2, recompute counted (Megatron-LM's formula)";
}

inline double model_flops_per_sequence(const ModelConfig& c, double S) {
  const double d = c.hidden, Hh = double(c.heads) * c.head_dim(), Gh = double(c.kv_heads) * c.head_dim();
  const double I = c.intermediate, V = c.vocab, L = c.layers;
  const double matmul = 2.0 * S * (L * (d * Hh + 2.0 * d * Gh + Hh * d + 3.0 * d * I) + d * V);
  const double attention = L * 4.0 * Hh * S * (S + 1.0) / 2.0;
  return 3.0 * (matmul + attention);
}

// Causal attention of S queries over S keys, Hh = heads x head dim.
inline double attention_flops_forward(double S, double Hh) { return 4.0 * Hh * S * (S + 1.0) / 2.0; }
inline double attention_flops_backward(double S, double Hh) { return 10.0 * Hh * S * (S + 1.0) / 2.0; }

struct PhaseFlops {  // forward + backward of one sequence, every layer
  double attention = 0, projections = 0, mlp = 0, lm_head = 0;
};

inline PhaseFlops phase_flops_per_sequence(const ModelConfig& c, double S) {
  const double d = c.hidden, Hh = double(c.heads) * c.head_dim(), Gh = double(c.kv_heads) * c.head_dim();
  const double I = c.intermediate, V = c.vocab, L = c.layers;
  PhaseFlops f;
  f.attention = L * (attention_flops_forward(S, Hh) + attention_flops_backward(S, Hh));
  f.projections = L * 3.0 * 2.0 * S * (d * Hh + 2.0 * d * Gh + Hh * d);
  f.mlp = L * 3.0 * 2.0 * S * 3.0 * d * I;
  f.lm_head = 3.0 * 2.0 * S * d * V;
  return f;
}

// The FLOPs one layer's forward computes again in its backward, per sequence of S tokens, and the
// fraction of that recompute which is attention (rows: offload's recomputed fraction of the tokens).
struct RecomputeFlops {
  double projections = 0, attention = 0, mlp = 0;
};

// FLOPs of one step in each convention, every rank: `sequences` sequences of S tokens; `redo`: what
// one layer recomputes per sequence (the policy's rules, predict/prediction.cpp).
inline StepFlops step_flops(const ModelConfig& c, double S, double sequences, const RecomputeFlops& redo) {
  const double model = model_flops_per_sequence(c, S);
  const double recompute = double(c.layers) * (redo.projections + redo.attention + redo.mlp);
  const double Hh = double(c.heads) * c.head_dim();
  const double causal = double(c.layers) * 4.0 * Hh * S * (S + 1.0) / 2.0;  // forward attention, per sequence
  const double square = double(c.layers) * 4.0 * Hh * S * S;
  StepFlops f;
  f[FlopsConvention::model] = sequences * model;
  f[FlopsConvention::hardware] = sequences * (model + recompute);
  // the square: every attention pass (3 of the model's, and the recomputed) counted over S^2
  const double attention_passes = 3.0 + (causal > 0 ? double(c.layers) * redo.attention / causal : 0.0);
  f[FlopsConvention::square] = sequences * (model + recompute + attention_passes * (square - causal));
  return f;
}

}  // namespace minilst
