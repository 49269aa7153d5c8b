#include "model/lm_head.hpp"

#include "kernels/cross_entropy.hpp"
#include "kernels/gemm.hpp"
#include "kernels/rmsnorm.hpp"

namespace minilst {

using kernels::gemm;
using kernels::Op;

template <class T>
double LmHeadLoss<T>::forward_backward(const Mat<T>& dx, const Mat<const T>& x,
                                       const Vec<const std::int64_t>& labels, const ParamSet<T>& params,
                                       const ParamSet<T>& grads, double grad_scale) const {
  ScopedPhase phase(timers_, "lm_head");
  const std::int64_t S = x.extent(0);
  const int M = effective_chunks(S, chunks_);
  Kokkos::deep_copy(ExecSpace(), dx, T(0));
  double loss_sum = 0;
  for (int c = 0; c < M; ++c) {
    const Range r = chunk_range(S, M, c);
    const auto xc = rows(x, r.begin, r.end);
    Tracked<Mat<T>> f(uninitialized, "head_in", MemCategory::workspace, r.size(), cfg_.hidden);     // [C, d]
    Tracked<Mat<T>> logits(uninitialized, "logits", MemCategory::workspace, r.size(), cfg_.vocab);  // [C, V]
    kernels::rmsnorm_forward<T>(f.view(), xc, params.final_norm, cfg_.norm_eps);
    gemm(Op::N, Op::N, T(1), f.view(), params.lm_head, T(0), logits.view());
    const auto labels_c = Kokkos::subview(labels, Kokkos::make_pair(r.begin, r.end));
    Tracked<Mat<T>> grad;  // vanilla: the logits' gradient beside them
    if (vanilla_) {
      grad = Tracked<Mat<T>>(uninitialized, "logits_grad", MemCategory::workspace, r.size(), cfg_.vocab);
      Kokkos::deep_copy(ExecSpace(), grad.view(), logits.view());
    }
    const Mat<T> dl = vanilla_ ? grad.view() : logits.view();
    loss_sum += kernels::cross_entropy_fused<T>(dl, labels_c, grad_scale);   // dl := dlogits
    gemm(Op::T, Op::N, T(1), f.view(), dl, T(1), grads.lm_head);           // dWout += f^T dl
    gemm(Op::N, Op::T, T(1), dl, params.lm_head, T(0), f.view());          // f := df
    kernels::rmsnorm_backward<T>(rows(dx, r.begin, r.end), grads.final_norm, f.view(), xc, params.final_norm,
                                 cfg_.norm_eps);
  }
  return loss_sum;
}

template class LmHeadLoss<float>;
template class LmHeadLoss<double>;

}  // namespace minilst
