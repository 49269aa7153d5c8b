// The analytic memory model of one rank's training step: the bytes each tracked
// category reaches at its high-water mark, derived from the buffers the code
// allocates (read next to model.cpp, decoder_layer.cpp, mlp_block.cpp,
// lm_head.cpp), so measured and predicted can be compared category by category.
//   S local tokens, d hidden, Hh = H*h, Gh = G*h, I intermediate, V vocab,
//   T scalar bytes, A accumulator bytes (lse, attention D), P parameters,
//   C_m / C_h the largest MLP / LM-head chunk (ceil(S / M)).
//   weights = gradients = P T, optimizer = 2 P T
//   activations: saved(layer) = S (2Hh + 2Gh + d) T + S H A   (q, o, k, v, y; lse)
//     full        (L+1) S d T + L saved      checkpoint  (L+1) S d T + 1 saved
//   workspace: 24 S (positions, tokens, labels) + S d T (dx) + the largest of
//     forward   attention input S d T | MLP chunk C_m (d + 2I) T | LM-head chunk C_h (d + V) T
//     backward  S d T (dx of the layer input) + the largest of
//               recompute input S d T (checkpoint) | dy + MLP chunk S d T + C_m (d + 3I) T |
//               attention grads S (d + 2Hh + 2Gh) T + S H A
//   device_total: P T (1 + 1 + 2) + the largest (activations + workspace) at the
//     same moment: last layer's MLP, the LM head, the last layer's backward.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "model/config.hpp"

namespace minilst {

// category -> bytes (weights, gradients, optimizer, activations, workspace, device_total)
std::map<std::string, std::uint64_t> predict_memory(const ModelConfig& cfg, const ModelOptions& opts,
                                                    std::int64_t seq_len, std::size_t scalar_bytes,
                                                    std::size_t accum_bytes);

}  // namespace minilst
