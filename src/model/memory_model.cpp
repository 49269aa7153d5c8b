#include "model/memory_model.hpp"

#include <algorithm>

#include "model/lm_head.hpp"
#include "model/mlp_block.hpp"

namespace minilst {

std::map<std::string, std::uint64_t> predict_memory(const ModelConfig& c, const ModelOptions& o,
                                                    std::int64_t seq_len, std::size_t T, std::size_t A) {
  using u64 = std::uint64_t;
  const u64 S = u64(seq_len), d = c.hidden, L = c.layers, H = c.heads, I = c.intermediate, V = c.vocab;
  const u64 Hh = H * c.head_dim(), Gh = u64(c.kv_heads) * c.head_dim();
  const u64 P = parameter_count(c);
  const auto largest_chunk = [&](int m) { const u64 n = u64(effective_chunks(seq_len, m)); return (S + n - 1) / n; };
  const u64 Cm = largest_chunk(o.mlp_chunks), Ch = largest_chunk(o.lm_head_chunks);
  const bool ckpt = o.policy == MemoryPolicy::checkpoint;

  // activations
  const u64 x_all = (L + 1) * S * d * T;                    // every layer's input + the final norm's
  const u64 qkv = S * (Hh + 2 * Gh) * T;
  const u64 saved = qkv + S * (Hh + d) * T + S * H * A;     // q, k, v + o, y + lse
  const u64 activations = x_all + (ckpt ? 1 : L) * saved;

  // workspace
  const u64 base = 24 * S + S * d * T;                      // positions, tokens, labels; dx
  const u64 mlp_fwd = Cm * (d + 2 * I) * T, mlp_bwd = Cm * MlpBlock<float>::workspace_per_token(c) * T;
  const u64 head = Ch * LmHeadLoss<float>::workspace_per_token(c) * T;
  const u64 attn_in = S * d * T;
  const u64 bwd_mlp = S * d * T + mlp_bwd;                  // dy + chunk
  const u64 bwd_attn = S * (d + 2 * Hh + 2 * Gh) * T + S * H * A;  // dy, dO, dq, dk, dv, D
  // (then dy, dq, dk, dv and da [S, d]: never more than bwd_attn, since H h = d)
  const u64 bwd = S * d * T + std::max({ckpt ? attn_in : 0, bwd_mlp, bwd_attn});
  const u64 workspace = base + std::max({attn_in, mlp_fwd, head, bwd});

  // device_total: activations and workspace at the same moments
  const u64 act_fwd_end = x_all + (ckpt ? 0 : L * saved);   // what stays after the last layer's forward
  const u64 fwd_attn_last = x_all + (ckpt ? 0 : (L - 1) * saved) + qkv + base + attn_in;
  const u64 fwd_mlp_last = x_all + (ckpt ? saved : L * saved) + base + mlp_fwd;
  const u64 at_head = act_fwd_end + base + head;
  const u64 act_bwd_last = L * S * d * T + saved;           // x[L] freed; the last layer's saved (or recomputed)
  const u64 bwd_last = act_bwd_last + (ckpt ? 0 : (L - 1) * saved) + base + bwd;
  const u64 recompute_last = ckpt ? L * S * d * T + qkv + base + S * d * T + attn_in : 0;
  const u64 params = 4 * P * T;
  const u64 device_total = params + std::max({fwd_attn_last, fwd_mlp_last, at_head, bwd_last, recompute_last});

  return {{"weights", P * T},           {"gradients", P * T},     {"optimizer", 2 * P * T},
          {"activations", activations}, {"workspace", workspace}, {"device_total", device_total}};
}

}  // namespace minilst
