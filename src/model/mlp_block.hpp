// The SwiGLU MLP block with its residual, over S tokens in M mini-sequences
// (MsT; ALST's TiledMLP):   z = y + (silu(b Wg) * (b Wu)) Wd,   b = rmsnorm(y; w_mlp)
// Forward: chunk by chunk, keeping nothing. Backward: each chunk recomputes its
// gate/up from y, then produces its dy and accumulates dWg, dWu, dWd, dw_mlp.
// Workspace per chunk of C tokens (the block's whole transient memory):
//   forward  b [C,d], g [C,I], u [C,I]          = C (d + 2I) elements
//   backward b [C,d], g, u, m [C,I]             = C (d + 3I) elements
// so the peak falls from S (d + 3I) to ceil(S/M) (d + 3I) as M grows.
// Results equal the unchunked block's to rounding (same math, other order).
// memory.policy vanilla (the papers' baseline): one chunk, and the forward keeps
// b, g, u and m in the layer's saved set for the backward (`keep`), which then
// recomputes nothing.
#pragma once

#include "io/phase_timers.hpp"
#include "memory/activation_store.hpp"
#include "model/config.hpp"
#include "model/parameters.hpp"

namespace minilst {

template <class T>
class MlpBlock {
 public:
  MlpBlock(const ModelConfig& cfg, int chunks, PhaseTimers* timers) : cfg_(cfg), chunks_(chunks), timers_(timers) {}

  // z := y + mlp(y);  z, y: [S, d]. keep: vanilla's saved MLP tensors (else empty views).
  void forward(const Mat<T>& z, const Mat<const T>& y, const LayerWeights<T>& w,
               const LayerActivations<T>& keep) const;
  // dy += d(mlp(y))/dy applied to dz (the residual's dz is the caller's);
  // dw.w_gate, dw.w_up, dw.w_down, dw.mlp_norm += their gradients.
  void backward(const Mat<T>& dy, const LayerWeights<T>& dw, const Mat<const T>& dz, const Mat<const T>& y,
                const LayerWeights<T>& w, const LayerActivations<T>& keep) const;

  // Workspace elements per token of a chunk (the backward's, the larger).
  static std::size_t workspace_per_token(const ModelConfig& c) {
    return std::size_t(c.hidden) + 3 * std::size_t(c.intermediate);
  }

 private:
  ModelConfig cfg_;
  int chunks_;
  PhaseTimers* timers_;
};

}  // namespace minilst
