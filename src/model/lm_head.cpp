#include "model/lm_head.hpp"

#include "kernels/bf16.hpp"
#include "kernels/select.hpp"

namespace minilst {

using kernels::Op;

template <class T>
typename LmHeadLoss<T>::ChunkBuffers LmHeadLoss<T>::chunk_buffers(std::int64_t C) const {
  const auto ws = MemCategory::workspace;
  ChunkBuffers b{Tracked<Mat<T>>(uninitialized, "head_in", ws, C, cfg_.hidden),
                 Tracked<Mat<T>>(uninitialized, "logits", ws, C, cfg_.vocab), {}};
  if (logits_grad_) b.logits_grad = Tracked<Mat<T>>(uninitialized, "logits_grad", ws, C, cfg_.vocab);
  return b;
}

template <class T>
double LmHeadLoss<T>::forward_backward(const Mat<T>& dx, const Mat<const T>& x,
                                       const Vec<const std::int64_t>& labels, const ParamViews<T>& params,
                                       const ParamViews<master_t<T>>& grads, double grad_scale) const {
  ScopedPhase phase(timers_, Phase::lm_head);
  const std::int64_t S = x.extent(0);
  const int M = effective_chunks(S, chunks_);
  const KernelVariant K = kernels_;
  Kokkos::deep_copy(ExecSpace(), dx, T(0));
  double loss_sum = 0;
  for (int c = 0; c < M; ++c) {
    const Range r = chunk_range(S, M, c);
    const auto xc = rows(x, r.begin, r.end);
    const auto ws = chunk_buffers(r.size());
    const Mat<T> f = ws.f.view(), logits = ws.logits.view();
    kernels::rmsnorm_forward<T>(K, f, xc, params.final_norm, cfg_.norm_eps);
    kernels::gemm(K, Op::N, Op::N, T(1), f, params.lm_head, T(0), logits);
    const auto labels_c = Kokkos::subview(labels, Kokkos::make_pair(r.begin, r.end));
    if (logits_grad_) Kokkos::deep_copy(ExecSpace(), ws.logits_grad.view(), logits);
    const Mat<T> dl = logits_grad_ ? ws.logits_grad.view() : logits;
    loss_sum += kernels::cross_entropy_fused<T>(K, dl, labels_c, grad_scale);  // dl := dlogits
    kernels::gemm(K, Op::T, Op::N, T(1), f, dl, T(1), grads.lm_head);          // dWout += f^T dl
    kernels::gemm(K, Op::N, Op::T, T(1), dl, params.lm_head, T(0), f);         // f := df
    kernels::rmsnorm_backward<T>(K, rows(dx, r.begin, r.end), grads.final_norm, f, xc, params.final_norm,
                                 cfg_.norm_eps);
  }
  return loss_sum;
}

template <class T>
void LmHeadLoss<T>::replay(std::int64_t S) const {
  const int M = effective_chunks(S, chunks_);
  for (int c = 0; c < M; ++c) chunk_buffers(chunk_range(S, M, c).size());
}

template class LmHeadLoss<float>;
template class LmHeadLoss<double>;
template class LmHeadLoss<bf16>;

}  // namespace minilst
