// Final norm, LM head and cross-entropy, fused forward + backward over S tokens
// in M mini-sequences (MsT; ALST's tiled logits loss; a fused linear CE).
// Per chunk of C tokens:
//   f = rmsnorm(x_c; w_final)   logits = f Wout [C, V]   loss_c = CE(logits, labels_c)
//   dlogits = (softmax - onehot) / N_valid   dWout += f^T dlogits   dx_c = rmsnorm'(dlogits Wout^T)
// The loss gradient is known in the forward, so each chunk's backward runs at
// once and the [S, V] logits never exist. Workspace per chunk: f [C,d] + logits [C,V].
// memory.policy vanilla (the papers' baseline): one chunk, and the gradient of the
// logits in a buffer of its own beside them, as autograd keeps both: f [S,d] + 2 [S,V].
#pragma once

#include "io/phase_timers.hpp"
#include "model/config.hpp"
#include "model/parameters.hpp"

namespace minilst {

template <class T>
class LmHeadLoss {
 public:
  LmHeadLoss(const ModelConfig& cfg, int chunks, PhaseTimers* timers, bool vanilla = false)
      : cfg_(cfg), chunks_(chunks), timers_(timers), vanilla_(vanilla) {}

  // dx := d(loss)/dx [S, d] (=); grads.final_norm, grads.lm_head +=.
  // grad_scale = 1 / (global valid labels ...). Returns sum_i loss_i over local valid labels.
  double forward_backward(const Mat<T>& dx, const Mat<const T>& x, const Vec<const std::int64_t>& labels,
                          const ParamSet<T>& params, const ParamSet<T>& grads, double grad_scale) const;

  // Workspace elements per token of a chunk.
  static std::size_t workspace_per_token(const ModelConfig& c) { return std::size_t(c.hidden) + c.vocab; }

 private:
  ModelConfig cfg_;
  int chunks_;
  PhaseTimers* timers_;
  bool vanilla_;
};

}  // namespace minilst
