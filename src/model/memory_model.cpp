#include "model/memory_model.hpp"

#include <algorithm>

#include "memory/activation_store.hpp"
#include "model/lm_head.hpp"
#include "model/mlp_block.hpp"

namespace minilst {

using u64 = std::uint64_t;

OffloadLayerBytes offload_layer_bytes(const ModelConfig& c, std::int64_t seq_len, std::size_t T, std::size_t A) {
  const double S = double(seq_len), d = c.hidden, H = c.heads, Hh = H * c.head_dim(),
               Gh = double(c.kv_heads) * c.head_dim();
  return {S * d * T, S * Hh * T + S * H * A, S * (Hh + 2 * Gh + d) * T};
}

std::uint64_t predict_host_offload(const ModelConfig& c, MemoryPolicy policy, double alpha, std::int64_t seq_len,
                                   std::size_t T, std::size_t A) {
  if (!uses_host_memory(policy)) return 0;
  const u64 S = u64(seq_len), d = c.hidden, L = c.layers, H = c.heads;
  const u64 Hh = H * c.head_dim(), Gh = u64(c.kv_heads) * c.head_dim();
  const u64 x_layers = L >= 1 ? L - 1 : 0;                // layers 0..L-2: their x's buffer is reused
  u64 bytes = x_layers * S * d * T;
  if (policy == MemoryPolicy::offload) {
    const u64 saved_layers = L >= 2 ? L - 2 : 0;           // layers 0..L-3: their saved buffers are reused
    const u64 r = u64(offload_host_rows(alpha, seq_len));
    bytes += saved_layers * (S * Hh * T + S * H * A + r * (Hh + 2 * Gh + d) * T);
  }
  return bytes;
}

std::map<std::string, std::uint64_t> predict_memory(const ModelConfig& c, const ModelOptions& o,
                                                    std::int64_t seq_len, std::size_t T, std::size_t A) {
  const u64 S = u64(seq_len), d = c.hidden, L = c.layers, H = c.heads, I = c.intermediate;
  const u64 Hh = H * c.head_dim(), Gh = u64(c.kv_heads) * c.head_dim();
  const u64 P = parameter_count(c);
  const auto largest_chunk = [&](int m) { const u64 n = u64(effective_chunks(seq_len, m)); return (S + n - 1) / n; };
  const u64 Cm = largest_chunk(o.mlp_chunks), Ch = largest_chunk(o.lm_head_chunks);
  const auto p = o.policy;
  const bool transient = p == MemoryPolicy::checkpoint || p == MemoryPolicy::checkpoint_offload;
  const bool rounding = uses_host_memory(p);                // two device buffers
  const u64 Lmin2 = std::min<u64>(L, 2);

  // activations: device buffers of x (X each) and of saved sets (R each) at each moment
  const u64 X = S * d * T;
  const u64 R = S * (2 * Hh + 2 * Gh + d) * T + S * H * A;
  const u64 saved_bufs = transient ? 1 : (rounding ? Lmin2 : L);      // while the last layer computes
  const u64 x_attn = rounding ? Lmin2 : L;                            // x buffers at the last layer's attention
  const u64 x_mlp = rounding ? 2 : L + 1;                             // ... at its MLP and at the LM head
  const u64 x_bwd = rounding ? Lmin2 : L;                             // ... at its backward (x_L gone unless shared)
  const u64 act_attn = x_attn * X + saved_bufs * R;
  const u64 act_mlp = x_mlp * X + saved_bufs * R;
  const u64 act_head = x_mlp * X + (transient ? 0 : saved_bufs) * R;
  const u64 act_bwd = x_bwd * X + (rounding && !transient ? Lmin2 : saved_bufs) * R;
  const u64 activations = std::max({act_attn, act_mlp, act_head, act_bwd});

  // workspace
  const u64 base = 24 * S + X;                              // positions, tokens, labels; dx
  const u64 mlp_fwd = Cm * (d + 2 * I) * T, mlp_bwd = Cm * MlpBlock<float>::workspace_per_token(c) * T;
  const u64 head = Ch * LmHeadLoss<float>::workspace_per_token(c) * T;
  const u64 attn_in = X;
  const u64 r = u64(offload_host_rows(o.offload.alpha, seq_len));
  const u64 recompute = transient ? attn_in
                        : (p == MemoryPolicy::offload && L >= 3 && r < S) ? (S - r) * d * T : 0;
  const u64 bwd_mlp = X + mlp_bwd;                          // dy + chunk
  const u64 bwd_attn = S * (d + 2 * Hh + 2 * Gh) * T + S * H * A;  // dy, dO, dq, dk, dv, D
  // (then dy, dq, dk, dv and da [S, d]: never more than bwd_attn, since H h = d)
  const u64 bwd = X + std::max({recompute, bwd_mlp, bwd_attn});
  const u64 workspace = base + std::max({attn_in, mlp_fwd, head, bwd});

  // device_total: activations and workspace at the same moments
  const u64 params = 4 * P * T;
  const u64 device_total = params + std::max({act_attn + base + attn_in, act_mlp + base + mlp_fwd,
                                              act_head + base + head, act_bwd + base + bwd});

  return {{"weights", P * T},
          {"gradients", P * T},
          {"optimizer", 2 * P * T},
          {"activations", activations},
          {"workspace", workspace},
          {"host_offload", predict_host_offload(c, p, o.offload.alpha, seq_len, T, A)},
          {"device_total", device_total}};
}

}  // namespace minilst
