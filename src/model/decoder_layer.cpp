#include "model/decoder_layer.hpp"

#include "kernels/gemm.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"

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
void DecoderLayer<T>::forward_mlp(const Mat<T>& z, const Mat<const T>& y, const LayerWeights<T>& w) const {
  ScopedPhase phase(timers_, "mlp");
  const std::int64_t S = y.extent(0);
  const int M = effective_chunks(S, opts_.mlp_chunks);
  Kokkos::deep_copy(z, y);  // residual: z = y + ...
  for (int c = 0; c < M; ++c) {
    const Range r = chunk_range(S, M, c);
    const auto yc = rows(y, r.begin, r.end);
    Tracked<Mat<T>> b("mlp_in", MemCategory::workspace, r.size(), cfg_.hidden);          // [C, d]
    Tracked<Mat<T>> g("mlp_gate", MemCategory::workspace, r.size(), cfg_.intermediate);  // [C, I]
    Tracked<Mat<T>> u("mlp_up", MemCategory::workspace, r.size(), cfg_.intermediate);    // [C, I]
    kernels::rmsnorm_forward<T>(b.view(), yc, w.mlp_norm, cfg_.norm_eps);
    gemm(Op::N, Op::N, T(1), b.view(), w.w_gate, T(0), g.view());
    gemm(Op::N, Op::N, T(1), b.view(), w.w_up, T(0), u.view());
    kernels::swiglu_forward<T>(g.view(), g.view(), u.view());               // g := silu(g) u
    gemm(Op::N, Op::N, T(1), g.view(), w.w_down, T(1), rows(z, r.begin, r.end));  // z_c += m Wd
  }
}

template <class T>
void DecoderLayer<T>::backward_mlp(const Mat<T>& dy, const LayerWeights<T>& dw, const Mat<const T>& dz,
                                   const Mat<const T>& y, const LayerWeights<T>& w) const {
  ScopedPhase phase(timers_, "mlp");
  const std::int64_t S = y.extent(0);
  const int M = effective_chunks(S, opts_.mlp_chunks);
  for (int c = 0; c < M; ++c) {
    const Range r = chunk_range(S, M, c);
    const auto yc = rows(y, r.begin, r.end);
    const auto dzc = rows(dz, r.begin, r.end);
    const std::size_t C = r.size(), d = cfg_.hidden, I = cfg_.intermediate;
    Tracked<Mat<T>> b("mlp_in", MemCategory::workspace, C, d);
    Tracked<Mat<T>> g("mlp_gate", MemCategory::workspace, C, I);
    Tracked<Mat<T>> u("mlp_up", MemCategory::workspace, C, I);
    Tracked<Mat<T>> m("mlp_act", MemCategory::workspace, C, I);
    // recompute the chunk's forward
    kernels::rmsnorm_forward<T>(b.view(), yc, w.mlp_norm, cfg_.norm_eps);
    gemm(Op::N, Op::N, T(1), b.view(), w.w_gate, T(0), g.view());
    gemm(Op::N, Op::N, T(1), b.view(), w.w_up, T(0), u.view());
    kernels::swiglu_forward<T>(m.view(), g.view(), u.view());
    // down projection: dWd += m^T dz_c ; dm = dz_c Wd^T (into m)
    gemm(Op::T, Op::N, T(1), m.view(), dzc, T(1), dw.w_down);
    gemm(Op::N, Op::T, T(1), dzc, w.w_down, T(0), m.view());
    kernels::swiglu_backward<T>(g.view(), u.view(), m.view(), g.view(), u.view());  // g, u := dg, du
    gemm(Op::T, Op::N, T(1), b.view(), g.view(), T(1), dw.w_gate);
    gemm(Op::T, Op::N, T(1), b.view(), u.view(), T(1), dw.w_up);
    // db = dg Wg^T + du Wu^T (into b, whose forward value is no longer needed)
    gemm(Op::N, Op::T, T(1), g.view(), w.w_gate, T(0), b.view());
    gemm(Op::N, Op::T, T(1), u.view(), w.w_up, T(1), b.view());
    kernels::rmsnorm_backward<T>(rows(dy, r.begin, r.end), dw.mlp_norm, b.view(), yc, w.mlp_norm,
                                 cfg_.norm_eps);
  }
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
  backward_mlp(dy.view(), dw, dz, saved.y.view(), w);

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
