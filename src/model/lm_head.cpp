#include "model/lm_head.hpp"

#include "kernels/bf16.hpp"
#include "kernels/cross_entropy_shard.hpp"
#include "kernels/select.hpp"

namespace minilst {

using kernels::Op;

namespace {
// dst := src, element by element, rounded to dst's type; both [C, V], contiguous.
template <class D, class S>
void copy_rounded(const Mat<D>& dst, const Mat<S>& src) {
  kernels::copy_rounded(Vec<D>(dst.data(), dst.size()), Vec<const S>(src.data(), src.size()));
}

// out [T C] := the labels of rows r of each of the T ranks' S (rank j's rows at j S of labels).
void gather_labels(const Vec<std::int64_t>& out, const Vec<const std::int64_t>& labels, Range r, std::int64_t S, int T) {
  const std::int64_t C = r.size(), r0 = r.begin;
  Kokkos::parallel_for("head_labels", Kokkos::RangePolicy<ExecSpace>(0, T * C), KOKKOS_LAMBDA(const std::int64_t i) {
    out(i) = labels((i / C) * S + r0 + i % C);
  });
}

template <class E>
Tracked<Mat<E>> workspace(const char* label, std::int64_t rows, std::int64_t cols) {
  return Tracked<Mat<E>>(uninitialized, label, MemCategory::workspace, rows, cols);
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
    if (tp_.split()) {
      loss_sum += split_chunk(dx, x, labels, r, S, &params, &grads, grad_scale);
      continue;
    }
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
template <class E>
double LmHeadLoss<T>::shard_cross_entropy(const Mat<E>& ce, const Vec<const std::int64_t>& labels, std::int64_t C,
                                          double grad_scale, bool compute) const {
  const int k = tp_.size(), t = tp_.rank();
  const std::int64_t B = ce.extent(0), v0 = tp_.slice().vocab0;
  const auto stats = workspace<A>("head_ce_stats", B, 3), all = workspace<A>("head_ce_stats_all", k * B, 3);
  const Tracked<Vec<A>> factor(uninitialized, "head_ce_factor", MemCategory::workspace, B);
  if (compute) kernels::cross_entropy_shard_stats<E>(ce, stats.view(), labels, v0);  // ce := exp(l - m_t)
  tp_.gather<A>(all.view(), stats.view());
  if (!compute) return 0;
  const double loss = kernels::cross_entropy_shard_combine<A>(all.view(), k, t, labels, factor.view(), grad_scale,
                                                              t * C, (t + 1) * C);
  kernels::cross_entropy_shard_grad<E>(ce, stats.view(), factor.view(), labels, v0, grad_scale);  // ce := dlogits
  return loss;
}

template <class T>
double LmHeadLoss<T>::split_chunk(const Mat<T>& dx, const Mat<const T>& x, const Vec<const std::int64_t>& labels,
                                  Range r, std::int64_t S, const ParamViews<T>* params,
                                  const ParamViews<master_t<T>>* grads, double grad_scale) const {
  const KernelChoice& K = kernels_;
  const std::int64_t C = r.size(), B = C * tp_.size(), d = cfg_.hidden;
  const bool compute = params != nullptr;
  const auto ws = chunk_buffers(B);  // f [T C, d], logits [T C, V] (and what the keeping adds)
  const Mat<T> f = ws.f.view(), logits = ws.logits.view();
  {
    const auto mine = workspace<T>("head_in_part", C, d);  // rmsnorm(x_c), this rank's rows
    if (compute) kernels::rmsnorm_forward<T>(K, mine.view(), rows(x, r.begin, r.end), params->final_norm, cfg_.norm_eps);
    tp_.gather<T>(f, mine.view());
  }
  // The group's labels of these rows: rank j's rows r of its S, in rank order.
  const Tracked<Vec<std::int64_t>> group_labels(uninitialized, "head_labels", MemCategory::workspace, B);
  if (compute) {
    gather_labels(group_labels.view(), labels, r, S, tp_.size());
    kernels::gemm(K, Op::N, Op::N, T(1), f, params->lm_head, T(0), logits);
  }
  double loss = 0;
  const Mat<T> dl = keeping_ == LogitsKeeping::separate ? ws.logits_grad.view() : logits;
  if (keeping_ == LogitsKeeping::hf_upcast) {  // as the whole row's: the fp32 upcast's gradient, cast back
    const Mat<A> g = ws.upcast_grad.view();
    if (compute && ws.upcast.bytes() > 0) copy_rounded(ws.upcast.view(), logits);
    if (compute) copy_rounded(g, logits);
    loss = shard_cross_entropy<A>(g, group_labels.view(), C, grad_scale, compute);
    if (compute) copy_rounded(dl, g);
  } else {
    if (compute && keeping_ == LogitsKeeping::separate) Kokkos::deep_copy(ExecSpace(), dl, logits);
    loss = shard_cross_entropy<T>(dl, group_labels.view(), C, grad_scale, compute);
  }
  if (compute) {
    kernels::gemm(K, Op::T, Op::N, T(1), f, dl, T(1), grads->lm_head);   // dWout += f^T dl
    kernels::gemm(K, Op::N, Op::T, T(1), dl, params->lm_head, T(0), f);  // f := df
  }
  const auto mine = workspace<T>("head_in_grad", C, d);  // this rank's rows of df, summed over the group
  tp_.reduce_scatter<T>(mine.view(), f, false);
  if (compute)
    kernels::rmsnorm_backward<T>(K, rows(dx, r.begin, r.end), grads->final_norm, mine.view(), rows(x, r.begin, r.end),
                                 params->final_norm, cfg_.norm_eps);
  return loss;
}

template <class T>
void LmHeadLoss<T>::replay(std::int64_t S) const {
  const int M = effective_chunks(S, chunks_);
  for (int c = 0; c < M; ++c) {
    const Range r = chunk_range(S, M, c);
    if (tp_.split()) split_chunk(Mat<T>(), Mat<const T>(), Vec<const std::int64_t>(), r, S, nullptr, nullptr, 0.0);
    else chunk_buffers(r.size());
  }
}

template class LmHeadLoss<float>;
template class LmHeadLoss<double>;
template class LmHeadLoss<bf16>;

}  // namespace minilst
