#include "model/model.hpp"

#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "kernels/rmsnorm.hpp"

namespace minilst {

using kernels::gemm;
using kernels::Op;

template <class T>
double Model<T>::head_forward_backward(const Mat<T>& dx, const Mat<const T>& x,
                                       const Vec<const std::int64_t>& labels, const ParamSet<T>& params,
                                       const ParamSet<T>& grads, double grad_scale) const {
  ScopedPhase phase(timers_, "lm_head");
  const std::int64_t S = x.extent(0);
  const int M = effective_chunks(S, opts_.lm_head_chunks);
  Kokkos::deep_copy(dx, T(0));
  double loss_sum = 0;
  for (int c = 0; c < M; ++c) {
    const Range r = chunk_range(S, M, c);
    const auto xc = rows(x, r.begin, r.end);
    Tracked<Mat<T>> f("head_in", MemCategory::workspace, r.size(), cfg_.hidden);       // [C, d]
    Tracked<Mat<T>> logits("logits", MemCategory::workspace, r.size(), cfg_.vocab);    // [C, V]
    kernels::rmsnorm_forward<T>(f.view(), xc, params.final_norm, cfg_.norm_eps);
    gemm(Op::N, Op::N, T(1), f.view(), params.lm_head, T(0), logits.view());
    const auto labels_c = Kokkos::subview(labels, Kokkos::make_pair(r.begin, r.end));
    loss_sum += kernels::cross_entropy_fused<T>(logits.view(), labels_c, grad_scale);  // logits := dlogits
    gemm(Op::T, Op::N, T(1), f.view(), logits.view(), T(1), grads.lm_head);           // dWout += f^T dl
    gemm(Op::N, Op::T, T(1), logits.view(), params.lm_head, T(0), f.view());          // f := df
    kernels::rmsnorm_backward<T>(rows(dx, r.begin, r.end), grads.final_norm, f.view(), xc,
                                 params.final_norm, cfg_.norm_eps);
  }
  return loss_sum;
}

template <class T>
double Model<T>::forward_backward(const ParamSet<T>& params, const ParamSet<T>& grads,
                                  const Vec<const std::int64_t>& tokens,
                                  const Vec<const std::int64_t>& labels, double grad_scale) const {
  const std::size_t S = tokens.extent(0), d = cfg_.hidden;
  const int L = cfg_.layers;
  const bool checkpoint = opts_.policy == MemoryPolicy::checkpoint;

  // x[l]: input of layer l (the residual stream), x[L]: input of the final norm.
  std::vector<Tracked<Mat<T>>> x(L + 1);
  std::vector<SavedLayer<T>> saved(L);
  double loss_sum = 0;
  Tracked<Mat<T>> dx("x_grad", MemCategory::workspace, S, d);
  {
    ScopedPhase phase(timers_, "forward");
    for (int l = 0; l <= L; ++l) x[l] = Tracked<Mat<T>>("x" + std::to_string(l), MemCategory::activations, S, d);
    kernels::embedding_forward<T>(x[0].view(), tokens, params.embed);
    for (int l = 0; l < L; ++l) {
      layer_.forward_attention(saved[l], x[l].view(), params.layers[l]);
      layer_.forward_mlp(x[l + 1].view(), saved[l].y.view(), params.layers[l]);
      if (checkpoint) saved[l].reset();
    }
    loss_sum = head_forward_backward(dx.view(), x[L].view(), labels, params, grads, grad_scale);
    x[L].reset();
  }
  {
    ScopedPhase phase(timers_, "backward");
    Tracked<Mat<T>> dx_in("x_grad_in", MemCategory::workspace, S, d);
    for (int l = L - 1; l >= 0; --l) {
      if (checkpoint) {
        ScopedPhase recompute(timers_, "recompute");
        layer_.forward_attention(saved[l], x[l].view(), params.layers[l]);
      }
      layer_.backward(dx_in.view(), grads.layers[l], dx.view(), saved[l], x[l].view(), params.layers[l]);
      saved[l].reset();
      x[l].reset();
      std::swap(dx, dx_in);  // dx := gradient w.r.t. this layer's input
    }
    kernels::embedding_backward<T>(grads.embed, tokens, dx.view());
  }
  return loss_sum;
}

template class Model<float>;
template class Model<double>;

}  // namespace minilst
