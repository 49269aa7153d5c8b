// The SwiGLU MLP block with its residual, over S tokens in M mini-sequences
// (MsT; ALST's TiledMLP):   z = y + (silu(b Wg) * (b Wu)) Wd,   b = rmsnorm(y; w_mlp)
// Forward: chunk by chunk, keeping nothing. Backward: each chunk recomputes its
// gate/up from y, then produces its dy and accumulates dWg, dWu, dWd, dw_mlp.
// Workspace per chunk of C tokens (the block's whole transient memory):
//   forward  b [C,d], g [C,I], u [C,I]          = C (d + 2I) elements
//   backward b [C,d], g, u, m [C,I]             = C (d + 3I) elements
// so the peak falls from S (d + 3I) to ceil(S/M) (d + 3I) as M grows.
// Results equal the unchunked block's to rounding (same math, other order).
// Where the activation store keeps the MLP's tensors (LayerActivations::mlp_saved:
// memory.policy vanilla, the papers' baseline, and offload, MEMO's swap set) the
// forward writes b, g, u and m into them, whole, and the backward reads them back,
// recomputing nothing (offload: the token rows it did not fetch, recompute_rows).
#pragma once

#include "core/config.hpp"
#include "core/phases.hpp"
#include "core/range.hpp"
#include "memory/activation_store.hpp"
#include "model/parameters.hpp"

namespace minilst {

template <class T>
class MlpBlock {
 public:
  MlpBlock(const ModelConfig& cfg, int chunks, const KernelChoice& kernels, PhaseTimers* timers)
      : cfg_(cfg), chunks_(chunks), kernels_(kernels), timers_(timers) {}

  // z := y + mlp(y);  z, y: [S, d]. keep: the layer's saved tensors (used when keep.mlp_saved).
  void forward(const Mat<T>& z, const Mat<const T>& y, const LayerWeights<T>& w,
               const LayerActivations<T>& keep) const;
  // dy += d(mlp(y))/dy applied to dz (the residual's dz is the caller's);
  // dw.w_gate, dw.w_up, dw.w_down, dw.mlp_norm += their gradients.
  void backward(const Mat<T>& dy, const LayerWeights<master_t<T>>& dw, const Mat<const T>& dz, const Mat<const T>& y,
                const LayerWeights<T>& w, const LayerActivations<T>& keep) const;

  // Where the store keeps the MLP's tensors: their rows r := from y's rows (MEMO's token-wise recompute).
  void recompute_rows(const LayerActivations<T>& keep, const LayerWeights<T>& w, Range r) const;

  // `minilst plan`'s twins: the chunks' buffers, no compute.
  void replay_forward(const LayerActivations<T>& keep) const;
  void replay_backward(const LayerActivations<T>& keep) const;

  // One chunk's workspace: in [C, d], gate, up [C, I], and act [C, I] in the backward.
  struct ChunkBuffers {
    Tracked<Mat<T>> in, gate, up, act;
  };
  ChunkBuffers chunk_buffers(std::int64_t C, bool backward) const;
  void replay_chunks(const LayerActivations<T>& keep, bool backward) const;
  // Workspace elements per token of a chunk (the backward's, the larger): what `auto` budgets.
  static std::size_t workspace_per_token(const ModelConfig& c) {
    return std::size_t(c.hidden) + 3 * std::size_t(c.intermediate);
  }

 private:
  // b := rmsnorm(y; w_mlp), g := b Wg, u := b Wu (the forward, and the backward's recompute).
  void gate_and_up(const Mat<T>& b, const Mat<T>& g, const Mat<T>& u, const Mat<const T>& y,
                   const LayerWeights<T>& w) const;

  ModelConfig cfg_;
  int chunks_;
  KernelChoice kernels_;
  PhaseTimers* timers_;
};

}  // namespace minilst
