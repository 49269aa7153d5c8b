// One Llama-style decoder layer, forward and backward, on S local tokens.
//   a = rmsnorm(x; w_attn);  q = rope(a Wq), k = rope(a Wk), v = a Wv
//   (rope at each token's rotary position: its global position, or with packed
//   documents its position within its document; the attention masks globally)
//   o = attention(q, k, v);  y = x + o Wo                       (attention block)
//   b = rmsnorm(y; w_mlp);   z = y + (silu(b Wg) * (b Wu)) Wd   (MLP block, in chunks)
// The attention block writes what the backward reads (x's q, k, v, o, statistics,
// y) into buffers of the activation store (LayerActivations); the layer never
// knows whether they stay on the device, travel to host memory or are recomputed.
// The MLP block (mlp_block.hpp) saves nothing unless the store keeps its tensors:
// its backward recomputes each chunk's gate/up from y (MsT / ALST tiled MLP), so
// the [S, I] intermediates never exist whole.
// Weight gradients accumulate (+=); dx and the activations are overwritten (=).
// Each compute method has a replay_ twin beside it for `minilst plan`: the same
// buffers in the same order, no compute (memory/memory_context.hpp).
// Tensor parallelism (model/tensor_group.hpp): x, y are the rank's n rows of the group's S
// (= T n); rmsnorm(x) is gathered to [S, d] before the projections (this rank's heads:
// cfg is local_model's), o Wo reduce-scattered back to [n, d] before the residual add; the
// backward gathers dy before Wo^T and reduce-scatters d(rmsnorm(x)). The attention strategy
// sees S tokens and H/T heads, as if T were 1.
#pragma once

#include "attention/attention_strategy.hpp"
#include "core/config.hpp"
#include "core/phases.hpp"
#include "memory/activation_store.hpp"
#include "model/mlp_block.hpp"
#include "model/parameters.hpp"
#include "model/tensor_group.hpp"

namespace minilst {

template <class T>
class DecoderLayer {
 public:
  // cfg: one rank's model (local_model under tensor parallelism); rope_positions: [S] the
  // block rows' (the group's whole sequence piece); tp: the tensor-parallel group.
  DecoderLayer(const ModelConfig& cfg, const ModelOptions& opts, AttentionStrategy<T>& attention,
               Vec<const std::int64_t> rope_positions, PhaseTimers* timers, const TensorGroup& tp)
      : cfg_(cfg), kernels_(opts.kernels), mlp_(cfg, opts.mlp_chunks, opts.kernels, timers, tp), attention_(attention),
        pos_(rope_positions), timers_(timers), tp_(tp) {}

  // a.q, a.k, a.v, a.o (and a.o_kept), a.stats, a.y := attention block of a.x
  void forward_attention(const LayerActivations<T>& a, const LayerWeights<T>& w) const;
  // The same, token-wise, for the residual rows `rows` only and without attention (o is
  // given): q, k, v = rope(rmsnorm(x) W*) (when local) and y = x + o Wo on those rows, and
  // the MLP's kept tensors from y (MEMO's recompute). Under tensor parallelism the block
  // tensors' rows are every group rank's rows `rows` (TensorGroup::block_segments), so the
  // call is collective: rmsnorm(x)'s rows gathered, o Wo's reduce-scattered.
  void recompute_rows(const LayerActivations<T>& a, const LayerWeights<T>& w, Range rows) const {
    token_rows(a, &w, rows);
  }
  // The strategy's kept q, k, v and o_kept (not local) := from a.x and a.o, without
  // attention: q, k, v projected as the forward does and handed to the strategy
  // (keep_input), o scattered as q is (offload at alpha 0: the kept set re-derived).
  void recompute_kept(const LayerActivations<T>& a, const LayerWeights<T>& w) const;
  // z := y + mlp(a.y);  z: [S, d]
  void forward_mlp(const Mat<T>& z, const LayerActivations<T>& a, const LayerWeights<T>& w) const {
    mlp_.forward(z, a.y, w, a);
  }
  // dx := d(loss)/dx from dz;  grads of w accumulate into dw (fp32 under bf16). dx may be
  // dz itself (the model runs it in place: dz is read in full before dx is written).
  void backward(const Mat<T>& dx, const LayerWeights<master_t<T>>& dw, const Mat<const T>& dz, const LayerActivations<T>& a,
                const LayerWeights<T>& w) const;
  // The attention strategy's statistics shape for this layer's S tokens.
  Extent2 stats_shape() const { return attention_.stats_shape(std::int64_t(pos_.extent(0)), cfg_.heads); }
  // Where the strategy's backward reads q, k, v, o (the store keeps them so).
  SavedLayout saved_layout() const {
    const std::int64_t h = cfg_.head_dim();
    return attention_.saved_layout(std::int64_t(pos_.extent(0)), cfg_.heads * h, cfg_.kv_heads * h);
  }

  // `minilst plan`'s twins of the methods above.
  void replay_forward_attention(const LayerActivations<T>& a) const;
  void replay_recompute_rows(const LayerActivations<T>& a, Range rows) const { token_rows(a, nullptr, rows); }
  void replay_recompute_kept(const LayerActivations<T>& a) const;
  void replay_forward_mlp(const LayerActivations<T>& a) const { mlp_.replay_forward(a); }
  void replay_backward(const LayerActivations<T>& a) const;

  // The layer's own buffers (workspace), each [rows, width] (rows: n for attn_in, y_grad; S for
  // the others):
  //   attn_in  [rows, d]: rmsnorm(x) in the forward, then its gradient in the backward
  //   block_in [S, d]: (T > 1) rmsnorm(x) gathered, then its gradient before the reduce-scatter
  //   y_grad_all [S, d]: (T > 1) dy gathered   out_partial [S, d]: (T > 1) o Wo before its reduce-scatter
  //   y_grad [rows, d]   o_grad, q_grad [rows, H*h]   k_grad, v_grad [rows, G*h]
  //   q_local [rows, H*h], k_local, v_local [rows, G*h]: the forward's q, k, v where the
  //   strategy keeps them in its own layout (not local), one at a time until handed over
  enum class Buffer { attn_in, block_in, y_grad, y_grad_all, out_partial, o_grad, q_grad, k_grad, v_grad, q_local, k_local, v_local };
  static constexpr Buffer kLocalInput[3] = {Buffer::q_local, Buffer::k_local, Buffer::v_local};
  Tracked<Mat<T>> workspace(Buffer b, std::int64_t rows) const;

 private:
  // The projections' input: rmsnorm(x) [n, d], gathered to [S, d] under tensor parallelism
  // (the [n, d] part freed once gathered). w null: a replay (the buffers alone).
  struct BlockInput {
    Tracked<Mat<T>> part, whole;
    Mat<T> view() const { return whole.bytes() > 0 || part.bytes() == 0 ? whole.view() : part.view(); }
  };
  BlockInput block_input(const Mat<const T>& x, const LayerWeights<T>* w) const;
  // a.y := a.x + a.o Wo on the residual rows r, the product reduce-scattered over the group
  // first (T > 1; o's rows: r's block segments). wo null: a replay.
  void add_output(const LayerActivations<T>& a, const Mat<T>* wo, Range r) const;
  std::int64_t block_rows(std::int64_t n) const { return n * tp_.size(); }
  // a.q, a.k, a.v := rope(rmsnorm(x) W*) on the block rows of the residual rows r (all of
  // them in the forward). w null: a replay.
  void project_qkv(const LayerActivations<T>& a, const LayerWeights<T>* w, Range r) const;
  // recompute_rows and its replay (w null).
  void token_rows(const LayerActivations<T>& a, const LayerWeights<T>* w, Range r) const;
  // Not local: a.q, a.k, a.v := the strategy's layout of rope(rmsnorm(x) W*), each
  // local tensor workspace until handed over (keep_input), one at a time.
  void project_kept(const LayerActivations<T>& a, const LayerWeights<T>& w) const;
  void replay_project_kept(const LayerActivations<T>& a) const;
  // o has q's heads: the strategy's scatter of input 0 turns it into o_kept, the
  // exact inverse of the gather its forward_kept ends with.
  void scatter_output(const LayerActivations<T>& a) const {
    attention_.keep_input(0, a.o, AttentionKept<T>{a.o_kept, a.k, a.v, a.o_kept});
  }

  ModelConfig cfg_;
  KernelChoice kernels_;
  MlpBlock<T> mlp_;
  AttentionStrategy<T>& attention_;
  Vec<const std::int64_t> pos_;  // [S] rotary positions (within each document; global with one document)
  PhaseTimers* timers_;
  const TensorGroup& tp_;
};

}  // namespace minilst
