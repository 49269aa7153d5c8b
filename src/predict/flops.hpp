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
#pragma once

#include "core/config.hpp"

namespace minilst {

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

}  // namespace minilst
