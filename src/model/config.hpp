// Model shape and the per-run options the model code needs.
#pragma once

#include <cstdint>
#include <string>

namespace minilst {

struct ModelConfig {
  int hidden = 256;         // d
  int layers = 4;           // L
  int heads = 8;            // H
  int kv_heads = 4;         // G (H % G == 0)
  int intermediate = 688;   // I
  int vocab = 4096;         // V
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  int head_dim() const { return hidden / heads; }  // h
};

// What the forward keeps for the backward (src/memory/activation_store.hpp):
//   full                every layer's input and saved tensors on the device
//   checkpoint          every layer's input on the device; the attention block recomputed
//   checkpoint_offload  checkpoint, the layer inputs in host memory (two device buffers)
//   offload             MEMO: inputs, o and lse in host memory, a token fraction alpha of
//                       q, k, v, y too, the other tokens recomputed (two device buffers)
//   vanilla             the papers' baseline: full, and the MLP keeps its [S, I]
//                       intermediates for the backward (no recompute), the LM head
//                       materialises the [S, V] logits and their gradient; no chunking
enum class MemoryPolicy { full, checkpoint, checkpoint_offload, offload, vanilla };

struct OffloadOptions {
  double alpha = 1.0;          // offload: token fraction of q, k, v, y kept in host memory
  double bandwidth_gbs = 0.0;  // host copy engine: modelled link bandwidth (0 = unthrottled)
};

struct ModelOptions {
  MemoryPolicy policy = MemoryPolicy::full;
  int mlp_chunks = 1;       // mini-sequences of the MLP block (>= 1)
  int lm_head_chunks = 1;   // mini-sequences of the LM head + loss (>= 1)
  OffloadOptions offload;
};

// Token range [begin, end) of chunk c when n tokens are cut into m chunks whose
// sizes differ by at most one; m larger than n gives n one-token chunks.
struct Range {
  std::int64_t begin, end;
  std::int64_t size() const { return end - begin; }
};
inline int effective_chunks(std::int64_t n, int m) { return int(n < m ? (n > 0 ? n : 1) : m); }
inline Range chunk_range(std::int64_t n, int m, int c) {
  m = effective_chunks(n, m);
  return {n * c / m, n * (c + 1) / m};
}

}  // namespace minilst
