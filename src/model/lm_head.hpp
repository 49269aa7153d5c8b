// Final norm, LM head and cross-entropy, fused forward + backward over S tokens
// in M mini-sequences (MsT; ALST's tiled logits loss; a fused linear CE).
// Per chunk of C tokens:
//   f = rmsnorm(x_c; w_final)   logits = f Wout [C, V]   loss_c = CE(logits, labels_c)
//   dlogits = (softmax - onehot) / N_valid   dWout += f^T dlogits   dx_c = rmsnorm'(dlogits Wout^T)
// The loss gradient is known in the forward, so each chunk's backward runs at
// once and the [S, V] logits never exist. Workspace per chunk: f [C,d] + logits [C,V].
// The papers' baselines keep more beside the logits (LogitsKeeping; one chunk, C = S):
//   separate   memory.policy vanilla: the logits' gradient has a buffer of its own,
//              as autograd keeps both: f [C,d] + 2 [C,V]
//   hf_upcast  memory.policy hf_checkpoint, Hugging Face's loss: the logits in the run's
//              type, their fp32 upcast (when the type is narrower) and the upcast's
//              gradient, fp32: f [C,d] + [C,V] (T) + 2 [C,V] (A) under bf16; the gradient
//              is cast back into the logits' buffer, as autograd hands it to the matmul
// Tensor parallelism (model/tensor_group.hpp; V: this rank's vocabulary rows, v0 the first):
// a chunk of C residual rows is gathered after the final norm, f [T C, d], and the logits
// [T C, V] of this rank's vocabulary go through the vocabulary-parallel cross-entropy
// (kernels/cross_entropy_shard.hpp: the [T C, 3] statistics gathered, every rank the same
// loss; each counts its own C rows); df [T C, d] is reduce-scattered before the norm's
// backward. Extra workspace: the norm's [C, d], the labels [T C], the statistics [T C, 3]
// and gathered [T^2 C, 3], the factors [T C], the reduce-scatter's [T C, d] and its result [C, d].
#pragma once

#include "core/config.hpp"
#include "core/range.hpp"
#include "core/phases.hpp"
#include "model/parameters.hpp"
#include "model/tensor_group.hpp"

namespace minilst {

enum class LogitsKeeping { in_place, separate, hf_upcast };

template <class T>
class LmHeadLoss {
 public:
  using A = accum_t<T>;
  LmHeadLoss(const ModelConfig& cfg, int chunks, const KernelChoice& kernels, PhaseTimers* timers, LogitsKeeping keeping,
             const TensorGroup& tp = TensorGroup::none())
      : cfg_(cfg), chunks_(chunks), kernels_(kernels), timers_(timers), keeping_(keeping), tp_(tp) {}

  // dx := d(loss)/dx [S, d] (=); grads.final_norm, grads.lm_head +=. labels: [S], or the
  // group's [T S] under tensor parallelism (rank t's rows at t S).
  // grad_scale = 1 / (global valid labels ...). Returns sum_i loss_i over local valid labels.
  double forward_backward(const Mat<T>& dx, const Mat<const T>& x, const Vec<const std::int64_t>& labels,
                          const ParamViews<T>& params, const ParamViews<master_t<T>>& grads, double grad_scale) const;
  // `minilst plan`'s twin: the chunks' buffers for S tokens, no compute.
  void replay(std::int64_t S) const;

  // One chunk's workspace: f [C, d], logits [C, V], and the logits' gradient [C, V] when kept
  // apart (separate), or the fp32 upcast and its gradient [C, V] (hf_upcast).
  struct ChunkBuffers {
    Tracked<Mat<T>> f, logits, logits_grad;
    Tracked<Mat<A>> upcast, upcast_grad;
  };
  ChunkBuffers chunk_buffers(std::int64_t C) const;
  // Workspace elements per token of a chunk: what `auto` budgets.
  static std::size_t workspace_per_token(const ModelConfig& c) { return std::size_t(c.hidden) + c.vocab; }

 private:
  // One chunk (rows r of S) under tensor parallelism; params, grads null: a replay.
  double split_chunk(const Mat<T>& dx, const Mat<const T>& x, const Vec<const std::int64_t>& labels, Range r,
                     std::int64_t S, const ParamViews<T>* params, const ParamViews<master_t<T>>* grads,
                     double grad_scale) const;
  // The vocabulary-parallel cross-entropy on ce [T C, V] (the logits, or their copy or fp32
  // upcast), in place: its loss over this rank's rows [t C, (t+1) C). Replayed when !compute.
  template <class E>
  double shard_cross_entropy(const Mat<E>& ce, const Vec<const std::int64_t>& labels, std::int64_t C,
                             double grad_scale, bool compute) const;

  ModelConfig cfg_;
  int chunks_;
  KernelChoice kernels_;
  PhaseTimers* timers_;
  LogitsKeeping keeping_;
  const TensorGroup& tp_;
};

}  // namespace minilst
