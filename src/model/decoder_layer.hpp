// One Llama-style decoder layer, forward and backward, on S local tokens.
//   a = rmsnorm(x; w_attn);  q = rope(a Wq), k = rope(a Wk), v = a Wv
//   o = attention(q, k, v);  y = x + o Wo                       (attention block)
//   b = rmsnorm(y; w_mlp);   z = y + (silu(b Wg) * (b Wu)) Wd   (MLP block, in chunks)
// The attention block saves q, k, v, o, its statistics and y (SavedLayer); the
// MLP block (mlp_block.hpp) saves nothing: its backward recomputes each chunk's
// gate/up from y (MsT / ALST tiled MLP), so the [S, I] intermediates never exist whole.
// Weight gradients accumulate (+=); dx is overwritten (=).
#pragma once

#include "io/phase_timers.hpp"
#include "model/attention_strategy.hpp"
#include "model/config.hpp"
#include "model/mlp_block.hpp"
#include "model/parameters.hpp"

namespace minilst {

template <class T>
struct SavedLayer {  // what the backward of one layer reads (category: activations)
  Tracked<Mat<T>> q, k, v;           // after rope: [S, H*h], [S, G*h], [S, G*h]
  Tracked<Mat<T>> o;                 // [S, H*h]
  Tracked<Mat<accum_t<T>>> attn;     // attention statistics, [S, H] (lse) for local attention
  Tracked<Mat<T>> y;                 // [S, d] residual after the attention block
  void reset() { q.reset(); k.reset(); v.reset(); o.reset(); attn.reset(); y.reset(); }
};

template <class T>
class DecoderLayer {
 public:
  DecoderLayer(const ModelConfig& cfg, const ModelOptions& opts, AttentionStrategy<T>& attention,
               Vec<const std::int64_t> positions, PhaseTimers* timers)
      : cfg_(cfg), mlp_(cfg, opts.mlp_chunks, timers), attention_(attention), pos_(positions), timers_(timers) {}

  // saved := attention block of x;  x: [S, d]
  void forward_attention(SavedLayer<T>& saved, const Mat<const T>& x, const LayerWeights<T>& w) const;
  // z := y + mlp(y);  z, y: [S, d]
  void forward_mlp(const Mat<T>& z, const Mat<const T>& y, const LayerWeights<T>& w) const { mlp_.forward(z, y, w); }
  // dx := d(loss)/dx from dz;  grads of w accumulate into dw
  void backward(const Mat<T>& dx, const LayerWeights<T>& dw, const Mat<const T>& dz,
                const SavedLayer<T>& saved, const Mat<const T>& x, const LayerWeights<T>& w) const;

 private:
  ModelConfig cfg_;
  MlpBlock<T> mlp_;
  AttentionStrategy<T>& attention_;
  Vec<const std::int64_t> pos_;  // [S] global positions (for rope)
  PhaseTimers* timers_;
};

}  // namespace minilst
