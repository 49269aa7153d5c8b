#include "model/decoder_layer.hpp"

#include "kernels/gemm.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"

namespace minilst {

using kernels::gemm;
using kernels::Op;

template <class T>
void DecoderLayer<T>::forward_attention(SavedLayer<T>& saved, const Mat<const T>& x,
                                        const LayerWeights<T>& w) const {
  const std::size_t S = x.extent(0), d = cfg_.hidden, h = cfg_.head_dim();
  const std::size_t Hh = std::size_t(cfg_.heads) * h, Gh = std::size_t(cfg_.kv_heads) * h;
  const auto act = MemCategory::activations;
  {
    Tracked<Mat<T>> a("attn_in", MemCategory::workspace, S, d);  // [S, d]
    kernels::rmsnorm_forward<T>(a.view(), x, w.attn_norm, cfg_.norm_eps);
    saved.q = Tracked<Mat<T>>("q", act, S, Hh);
    saved.k = Tracked<Mat<T>>("k", act, S, Gh);
    saved.v = Tracked<Mat<T>>("v", act, S, Gh);
    gemm(Op::N, Op::N, T(1), a.view(), w.wq, T(0), saved.q.view());
    gemm(Op::N, Op::N, T(1), a.view(), w.wk, T(0), saved.k.view());
    gemm(Op::N, Op::N, T(1), a.view(), w.wv, T(0), saved.v.view());
  }
  kernels::rope_forward<T>(saved.q.view(), pos_, h, cfg_.rope_theta);
  kernels::rope_forward<T>(saved.k.view(), pos_, h, cfg_.rope_theta);
  saved.o = Tracked<Mat<T>>("o", act, S, Hh);
  {
    ScopedPhase phase(timers_, "attention");
    saved.attn = attention_.forward(saved.o.view(), saved.q.view(), saved.k.view(), saved.v.view(), act);
  }
  saved.y = Tracked<Mat<T>>("y", act, S, d);
  Kokkos::deep_copy(saved.y.view(), x);                                    // y = x
  gemm(Op::N, Op::N, T(1), saved.o.view(), w.wo, T(1), saved.y.view());   // y += o Wo
}

template <class T>
void DecoderLayer<T>::backward(const Mat<T>& dx, const LayerWeights<T>& dw, const Mat<const T>& dz,
                               const SavedLayer<T>& saved, const Mat<const T>& x,
                               const LayerWeights<T>& w) const {
  const std::size_t S = x.extent(0), d = cfg_.hidden, h = cfg_.head_dim();
  const std::size_t Hh = std::size_t(cfg_.heads) * h, Gh = std::size_t(cfg_.kv_heads) * h;
  const auto ws = MemCategory::workspace;

  // MLP block: dy = dz + mlp'(dz)
  Tracked<Mat<T>> dy("y_grad", ws, S, d);
  Kokkos::deep_copy(dy.view(), dz);
  mlp_.backward(dy.view(), dw, dz, saved.y.view(), w);

  // output projection: dO = dy Wo^T ; dWo += o^T dy
  Tracked<Mat<T>> d_o("o_grad", ws, S, Hh);
  gemm(Op::N, Op::T, T(1), dy.view(), w.wo, T(0), d_o.view());
  gemm(Op::T, Op::N, T(1), saved.o.view(), dy.view(), T(1), dw.wo);

  Tracked<Mat<T>> dq("q_grad", ws, S, Hh), dk("k_grad", ws, S, Gh), dv("v_grad", ws, S, Gh);
  {
    ScopedPhase phase(timers_, "attention");
    attention_.backward(dq.view(), dk.view(), dv.view(), d_o.view(), saved.o.view(), saved.attn.view(),
                        saved.q.view(), saved.k.view(), saved.v.view());
  }
  d_o.reset();
  kernels::rope_backward<T>(dq.view(), pos_, h, cfg_.rope_theta);
  kernels::rope_backward<T>(dk.view(), pos_, h, cfg_.rope_theta);

  // projections: dW* += a^T d* ; da = dq Wq^T + dk Wk^T + dv Wv^T  (a recomputed from x)
  Tracked<Mat<T>> a("attn_in", ws, S, d);
  kernels::rmsnorm_forward<T>(a.view(), x, w.attn_norm, cfg_.norm_eps);
  gemm(Op::T, Op::N, T(1), a.view(), dq.view(), T(1), dw.wq);
  gemm(Op::T, Op::N, T(1), a.view(), dk.view(), T(1), dw.wk);
  gemm(Op::T, Op::N, T(1), a.view(), dv.view(), T(1), dw.wv);
  gemm(Op::N, Op::T, T(1), dq.view(), w.wq, T(0), a.view());  // a := da
  gemm(Op::N, Op::T, T(1), dk.view(), w.wk, T(1), a.view());
  gemm(Op::N, Op::T, T(1), dv.view(), w.wv, T(1), a.view());

  // residual + norm: dx = dy + rmsnorm'(da)
  Kokkos::deep_copy(dx, dy.view());
  kernels::rmsnorm_backward<T>(dx, dw.attn_norm, a.view(), x, w.attn_norm, cfg_.norm_eps);
}

template class DecoderLayer<float>;
template class DecoderLayer<double>;

}  // namespace minilst
