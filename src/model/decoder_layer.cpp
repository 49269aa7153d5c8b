#include "model/decoder_layer.hpp"

#include "kernels/gemm.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"

namespace minilst {

using kernels::gemm;
using kernels::Op;

template <class T>
void DecoderLayer<T>::project_qkv(const LayerActivations<T>& a, const LayerWeights<T>& w, Range r) const {
  const auto x = rows(a.x, r.begin, r.end);
  const auto q = rows(a.q, r.begin, r.end), k = rows(a.k, r.begin, r.end), v = rows(a.v, r.begin, r.end);
  const auto pos = Kokkos::subview(pos_, Kokkos::make_pair(r.begin, r.end));
  const std::size_t h = cfg_.head_dim();
  {
    Tracked<Mat<T>> an(uninitialized, "attn_in", MemCategory::workspace, r.size(), cfg_.hidden);  // [C, d]
    kernels::rmsnorm_forward<T>(an.view(), x, w.attn_norm, cfg_.norm_eps);
    gemm(Op::N, Op::N, T(1), an.view(), w.wq, T(0), q);
    gemm(Op::N, Op::N, T(1), an.view(), w.wk, T(0), k);
    gemm(Op::N, Op::N, T(1), an.view(), w.wv, T(0), v);
  }
  kernels::rope_forward<T>(q, pos, h, cfg_.rope_theta);
  kernels::rope_forward<T>(k, pos, h, cfg_.rope_theta);
}

template <class T>
void DecoderLayer<T>::forward_attention(const LayerActivations<T>& a, const LayerWeights<T>& w) const {
  project_qkv(a, w, Range{0, std::int64_t(a.x.extent(0))});
  {
    ScopedPhase phase(timers_, "attention");
    attention_.forward(a.o, a.stats, a.q, a.k, a.v);
  }
  Kokkos::deep_copy(ExecSpace(), a.y, a.x);                   // y = x
  gemm(Op::N, Op::N, T(1), a.o, w.wo, T(1), a.y);             // y += o Wo
}

template <class T>
void DecoderLayer<T>::recompute_rows(const LayerActivations<T>& a, const LayerWeights<T>& w, Range r) const {
  if (r.size() <= 0) return;
  project_qkv(a, w, r);
  const auto y = rows(a.y, r.begin, r.end);
  Kokkos::deep_copy(ExecSpace(), y, rows(a.x, r.begin, r.end));                  // y = x
  gemm(Op::N, Op::N, T(1), rows(a.o, r.begin, r.end), w.wo, T(1), y);            // y += o Wo
}

template <class T>
void DecoderLayer<T>::backward(const Mat<T>& dx, const LayerWeights<T>& dw, const Mat<const T>& dz,
                               const LayerActivations<T>& a, const LayerWeights<T>& w) const {
  const std::size_t S = a.x.extent(0), d = cfg_.hidden, h = cfg_.head_dim();
  const std::size_t Hh = std::size_t(cfg_.heads) * h, Gh = std::size_t(cfg_.kv_heads) * h;
  const auto ws = MemCategory::workspace;

  // MLP block: dy = dz + mlp'(dz)
  Tracked<Mat<T>> dy(uninitialized, "y_grad", ws, S, d);
  Kokkos::deep_copy(ExecSpace(), dy.view(), dz);
  mlp_.backward(dy.view(), dw, dz, a.y, w, a);

  // output projection: dO = dy Wo^T ; dWo += o^T dy
  Tracked<Mat<T>> d_o(uninitialized, "o_grad", ws, S, Hh);
  gemm(Op::N, Op::T, T(1), dy.view(), w.wo, T(0), d_o.view());
  gemm(Op::T, Op::N, T(1), a.o, dy.view(), T(1), dw.wo);

  Tracked<Mat<T>> dq(uninitialized, "q_grad", ws, S, Hh), dk(uninitialized, "k_grad", ws, S, Gh),
      dv(uninitialized, "v_grad", ws, S, Gh);  // the strategies overwrite them
  {
    ScopedPhase phase(timers_, "attention");
    attention_.backward(dq.view(), dk.view(), dv.view(), d_o.view(), a.o, a.stats, a.q, a.k, a.v);
  }
  d_o.reset();
  kernels::rope_backward<T>(dq.view(), pos_, h, cfg_.rope_theta);
  kernels::rope_backward<T>(dk.view(), pos_, h, cfg_.rope_theta);

  // projections: dW* += an^T d* ; dan = dq Wq^T + dk Wk^T + dv Wv^T  (an = rmsnorm(x) recomputed)
  Tracked<Mat<T>> an(uninitialized, "attn_in", ws, S, d);
  kernels::rmsnorm_forward<T>(an.view(), a.x, w.attn_norm, cfg_.norm_eps);
  gemm(Op::T, Op::N, T(1), an.view(), dq.view(), T(1), dw.wq);
  gemm(Op::T, Op::N, T(1), an.view(), dk.view(), T(1), dw.wk);
  gemm(Op::T, Op::N, T(1), an.view(), dv.view(), T(1), dw.wv);
  gemm(Op::N, Op::T, T(1), dq.view(), w.wq, T(0), an.view());  // an := dan
  gemm(Op::N, Op::T, T(1), dk.view(), w.wk, T(1), an.view());
  gemm(Op::N, Op::T, T(1), dv.view(), w.wv, T(1), an.view());

  // residual + norm: dx = dy + rmsnorm'(dan)
  Kokkos::deep_copy(ExecSpace(), dx, dy.view());
  kernels::rmsnorm_backward<T>(dx, dw.attn_norm, an.view(), a.x, w.attn_norm, cfg_.norm_eps);
}

template class DecoderLayer<float>;
template class DecoderLayer<double>;

}  // namespace minilst
