// The analytic memory model of one rank's training step: the bytes each tracked
// category reaches at its high-water mark, derived from the buffers the code
// allocates (read next to model.cpp, memory/activation_store.cpp,
// decoder_layer.cpp, mlp_block.cpp, lm_head.cpp), so measured and predicted can
// be compared category by category. Local attention (no sequence parallelism).
//   S local tokens, d hidden, Hh = H*h, Gh = G*h, I intermediate, V vocab,
//   T scalar bytes, A accumulator bytes (lse, attention D), P parameters,
//   C_m / C_h the largest MLP / LM-head chunk (ceil(S / M)), r = round(alpha S).
//   weights = gradients = P T, optimizer = 2 P T
//   X = S d T (one layer input); R = S (2Hh + 2Gh + d) T + S H A (q, o, k, v, y; lse)
//   activations (device buffers of the activation store):
//     full (L+1) X + L R    checkpoint (L+1) X + R    checkpoint_offload 2X + R
//     offload 2X + min(L, 2) R
//   host_offload (kept across steps): checkpoint_offload (L-1) X;
//     offload (L-1) X + (L-2) (S Hh T + S H A + r (Hh + 2Gh + d) T)   (counts >= 0)
//   workspace: 24 S (positions, tokens, labels) + X (dx) + the largest of
//     forward   attention input X | MLP chunk C_m (d + 2I) T | LM-head chunk C_h (d + V) T
//     backward  X (dx of the layer input) + the largest of
//               recompute: attention input X (checkpoint kinds) or (S - r) d T (offload,
//               L >= 3, r < S) | dy + MLP chunk X + C_m (d + 3I) T |
//               attention grads S (d + 2Hh + 2Gh) T + S H A
//   device_total: P T (1 + 1 + 2) + the largest (activations + workspace) at the
//     same moment: the last layer's attention input, its MLP, the LM head, its
//     recompute and its backward.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "model/config.hpp"

namespace minilst {

// category -> bytes (weights, gradients, optimizer, activations, workspace,
// host_offload, device_total). opts.offload.alpha: the largest alpha of the run.
std::map<std::string, std::uint64_t> predict_memory(const ModelConfig& cfg, const ModelOptions& opts,
                                                    std::int64_t seq_len, std::size_t scalar_bytes,
                                                    std::size_t accum_bytes);

// Host bytes the offload kinds keep per rank (0 for full and checkpoint), and
// the bytes one layer moves to host and back in offload (x, o + lse, alpha of q, k, v, y).
std::uint64_t predict_host_offload(const ModelConfig& cfg, MemoryPolicy policy, double alpha, std::int64_t seq_len,
                                   std::size_t scalar_bytes, std::size_t accum_bytes);
struct OffloadLayerBytes {
  double x = 0, o = 0, rest = 0;  // x [S, d]; o [S, Hh] + lse; q, k, v, y of all S tokens
};
OffloadLayerBytes offload_layer_bytes(const ModelConfig& cfg, std::int64_t seq_len, std::size_t scalar_bytes,
                                      std::size_t accum_bytes);

}  // namespace minilst
