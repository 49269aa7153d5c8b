// The SwiGLU MLP block with its residual, over S tokens in M mini-sequences
// (MsT; ALST's TiledMLP):   z = y + (silu(b Wg) * (b Wu)) Wd,   b = rmsnorm(y; w_mlp)
// Forward and backward are each written once, as a loop over chunks. A chunk of C
// tokens has four tensors: b [C, d], g = b Wg, u = b Wu, m = silu(g) u [C, I].
//  - Where the activation store keeps the MLP's tensors (LayerActivations::mlp_saved:
//    memory.policy vanilla, the papers' baseline, and offload with one MLP chunk,
//    MEMO's swap set) the MLP is one chunk, the whole sequence, whose tensors are the
//    store's: the forward writes them, the backward reads them back and recomputes
//    nothing (offload: the token rows it did not fetch, recompute_rows).
//  - Otherwise each chunk's tensors are workspace: the forward holds b, g, u (m is g,
//    in place) and keeps nothing; the backward recomputes the chunk's b, g, u, m from
//    y, then produces its dy and accumulates dWg, dWu, dWd, dw_mlp.
// Workspace per chunk of C tokens (the block's whole transient memory):
//   forward  b [C,d], g [C,I], u [C,I]          = C (d + 2I) elements
//   backward b [C,d], g, u, m [C,I]             = C (d + 3I) elements
// so the peak falls from S (d + 3I) to ceil(S/M) (d + 3I) as M grows.
// Results equal the unchunked block's to rounding (same math, other order); the kept
// chunk runs the very operations of a one-chunk run, in the same order.
// Tensor parallelism (model/tensor_group.hpp; I: this rank's columns): a chunk of C residual
// rows is gathered after its norm, b [T C, d] (rank t's rows at t C), so the chunk's tensors
// have T C rows; m Wd is reduce-scattered back onto the chunk's rows of z. The backward
// gathers dz's chunk (dz_all [T C, d]) and reduce-scatters db. Extra workspace per chunk:
// the norm's [C, d] before its gather, the reduce-scatter's receive buffer [T C, d], and
// dz_all [T C, d] in the backward (and m Wd's [T C, d] where the store keeps b; and for offload's
// recompute of rows r of the kept tensors, b's gathered rows [T |r|, d]).
#pragma once

#include "core/config.hpp"
#include "core/phases.hpp"
#include "core/range.hpp"
#include "memory/activation_store.hpp"
#include "model/parameters.hpp"
#include "model/tensor_group.hpp"

namespace minilst {

template <class T>
class MlpBlock {
 public:
  MlpBlock(const ModelConfig& cfg, int chunks, const KernelChoice& kernels, PhaseTimers* timers,
           const TensorGroup& tp = TensorGroup::none())
      : cfg_(cfg), chunks_(chunks), kernels_(kernels), timers_(timers), tp_(tp) {}

  // z := y + mlp(y);  z, y: [S, d]. keep: the layer's saved tensors (used when keep.mlp_saved).
  void forward(const Mat<T>& z, const Mat<const T>& y, const LayerWeights<T>& w,
               const LayerActivations<T>& keep) const;
  // dy += d(mlp(y))/dy applied to dz (the residual's dz is the caller's);
  // dw.w_gate, dw.w_up, dw.w_down, dw.mlp_norm += their gradients.
  void backward(const Mat<T>& dy, const LayerWeights<master_t<T>>& dw, const Mat<const T>& dz, const Mat<const T>& y,
                const LayerWeights<T>& w, const LayerActivations<T>& keep) const;

  // Where the store keeps the MLP's tensors: their rows r := from y's rows (MEMO's token-wise
  // recompute; under tensor parallelism the block rows of every group rank's rows r, collective:
  // rmsnorm(y)'s rows gathered through a [T |r|, d] workspace). w null: a replay.
  void recompute_rows(const LayerActivations<T>& keep, const LayerWeights<T>* w, Range r) const;

  // `minilst plan`'s twins: the chunks' buffers, no compute.
  void replay_forward(const LayerActivations<T>& keep) const;
  void replay_backward(const LayerActivations<T>& keep) const;

  // One chunk's workspace: in [C, d], gate, up [C, I], and act [C, I] in the backward (C: T C
  // rows under tensor parallelism).
  struct ChunkBuffers {
    Tracked<Mat<T>> in, gate, up, act;
  };
  ChunkBuffers chunk_buffers(std::int64_t C, bool backward) const;
  // Workspace elements per token of a chunk (the backward's, the larger): what `auto` budgets.
  static std::size_t workspace_per_token(const ModelConfig& c) {
    return std::size_t(c.hidden) + 3 * std::size_t(c.intermediate);
  }

 private:
  // Chunk c of M: its token rows and its tensors b, g, u, m, the store's rows or its
  // own workspace (owned here; forward: m is g, nothing kept).
  struct Chunk {
    Range r;
    Mat<T> b, g, u, m;
    ChunkBuffers ws;
  };
  int chunk_count(const LayerActivations<T>& keep, std::int64_t S) const {
    return keep.mlp_saved ? 1 : effective_chunks(S, chunks_);
  }
  Chunk chunk(const LayerActivations<T>& keep, std::int64_t S, int M, int c, bool backward) const;
  // b := rmsnorm(y; w_mlp) (gathered), g := b Wg, u := b Wu, m := silu(g) u (the forward's
  // tensors, and the backward's recompute); y: the chunk's rows. w null: a replay.
  void forward_tensors(const Chunk& ch, const Mat<const T>& y, const LayerWeights<T>* w) const;
  // Its two halves: b := rmsnorm(y) (gathered to [T C, d] under tensor parallelism; w null: a
  // replay), and g, u, m from b.
  void norm_input(const Mat<T>& b, const Mat<const T>& y, const LayerWeights<T>* w) const;
  void project(const Mat<T>& b, const Mat<T>& g, const Mat<T>& u, const Mat<T>& m, const LayerWeights<T>& w) const;
  // z_c += m Wd (reduce-scattered first under tensor parallelism); z: the chunk's rows.
  void add_down(const Chunk& ch, const Mat<T>& z, const LayerActivations<T>& keep, const LayerWeights<T>* w) const;
  // The chunk's forward and backward, written once for the run and the replay (w, dw null).
  void forward_chunk(const Chunk& ch, const Mat<T>& z, const Mat<const T>& y, const LayerWeights<T>* w,
                     const LayerActivations<T>& keep) const;
  void backward_chunk(const Chunk& ch, const Mat<T>& dy, const LayerWeights<master_t<T>>* dw, const Mat<const T>& dz,
                      const Mat<const T>& y, const LayerWeights<T>* w, const LayerActivations<T>& keep) const;
  Tracked<Mat<T>> workspace(const char* label, std::int64_t rows, std::int64_t cols) const {
    return Tracked<Mat<T>>(uninitialized, label, MemCategory::workspace, rows, cols);
  }
  void replay_chunks(const LayerActivations<T>& keep, bool backward) const;

  ModelConfig cfg_;
  int chunks_;
  KernelChoice kernels_;
  PhaseTimers* timers_;
  const TensorGroup& tp_;
};

}  // namespace minilst
