// Model FLOPs of one training step (the MFU convention: what the model needs,
// not what this implementation spends; recomputation is not counted).
//   forward per sequence of S tokens:
//     matmuls    2 S [ L (d*Hh + 2 d*Gh + Hh*d + 3 d*I) + d*V ]      (Hh = H*h, Gh = G*h)
//     attention  L * 4 Hh * S(S+1)/2   (q.k and p.v over the causal context of each query)
//   training = 3 x forward (backward = 2 x forward), times grad_accum sequences.
#pragma once

#include "model/config.hpp"

namespace minilst {

inline double model_flops_per_sequence(const ModelConfig& c, double S) {
  const double d = c.hidden, Hh = double(c.heads) * c.head_dim(), Gh = double(c.kv_heads) * c.head_dim();
  const double I = c.intermediate, V = c.vocab, L = c.layers;
  const double matmul = 2.0 * S * (L * (d * Hh + 2.0 * d * Gh + Hh * d + 3.0 * d * I) + d * V);
  const double attention = L * 4.0 * Hh * S * (S + 1.0) / 2.0;
  return 3.0 * (matmul + attention);
}

}  // namespace minilst
