#include "model/lm_head.hpp"

#include "kernels/bf16.hpp"
#include "kernels/select.hpp"

namespace minilst {

using kernels::Op;

namespace {
// dst := src, element by element, rounded to dst's type; both [C, V], contiguous.
template <class D, class S>
void copy_rounded(const Mat<D>& dst, const Mat<S>& src) {
  kernels::copy_rounded(Vec<D>(dst.data(), dst.size()), Vec<const S>(src.data(), src.size()));
}
}  // namespace

template <class T>
typename LmHeadLoss<T>::ChunkBuffers LmHeadLoss<T>::chunk_buffers(std::int64_t C) const {
  const auto ws = MemCategory::workspace;
  ChunkBuffers b{Tracked<Mat<T>>(uninitialized, "head_in", ws, C, cfg_.hidden),
                 Tracked<Mat<T>>(uninitialized, "logits", ws, C, cfg_.vocab), {}, {}, {}};
  if (keeping_ == LogitsKeeping::separate)
    b.logits_grad = Tracked<Mat<T>>(uninitialized, "logits_grad", ws, C, cfg_.vocab);
  if (keeping_ == LogitsKeeping::hf_upcast) {
    if (sizeof(T) < sizeof(A)) b.upcast = Tracked<Mat<A>>(uninitialized, "logits_fp32", ws, C, cfg_.vocab);
    b.upcast_grad = Tracked<Mat<A>>(uninitialized, "logits_fp32_grad", ws, C, cfg_.vocab);
  }
  return b;
}

template <class T>
double LmHeadLoss<T>::forward_backward(const Mat<T>& dx, const Mat<const T>& x,
                                       const Vec<const std::int64_t>& labels, const ParamViews<T>& params,
                                       const ParamViews<master_t<T>>& grads, double grad_scale) const {
  ScopedPhase phase(timers_, Phase::lm_head);
  const std::int64_t S = x.extent(0);
  const int M = effective_chunks(S, chunks_);
  const KernelChoice& K = kernels_;
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
    const bool separate = keeping_ == LogitsKeeping::separate;
    const Mat<T> dl = separate ? ws.logits_grad.view() : logits;
    if (keeping_ == LogitsKeeping::hf_upcast) {  // up = float(logits); g := dCE/dup; dl := g cast back
      const Mat<A> g = ws.upcast_grad.view();
      if (ws.upcast.bytes() > 0) copy_rounded(ws.upcast.view(), logits);
      copy_rounded(g, logits);
      loss_sum += kernels::cross_entropy_fused<A>(K, g, labels_c, grad_scale);
      copy_rounded(dl, g);
    } else {
      if (separate) Kokkos::deep_copy(ExecSpace(), dl, logits);
      loss_sum += kernels::cross_entropy_fused<T>(K, dl, labels_c, grad_scale);  // dl := dlogits
    }
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
