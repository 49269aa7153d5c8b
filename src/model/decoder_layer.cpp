#include "model/decoder_layer.hpp"

#include <stdexcept>

#include "kernels/bf16.hpp"
#include "kernels/rope.hpp"
#include "kernels/select.hpp"

namespace minilst {

using kernels::Op;

template <class T>
Tracked<Mat<T>> DecoderLayer<T>::workspace(Buffer b, std::int64_t rows) const {
  const std::int64_t d = cfg_.hidden, Hh = std::int64_t(cfg_.heads) * cfg_.head_dim(),
                     Gh = std::int64_t(cfg_.kv_heads) * cfg_.head_dim();
  const auto make = [&](const char* label, std::int64_t width) {
    return Tracked<Mat<T>>(uninitialized, label, MemCategory::workspace, rows, width);
  };
  switch (b) {
    case Buffer::attn_in: return make("attn_in", d);
    case Buffer::y_grad: return make("y_grad", d);
    case Buffer::o_grad: return make("o_grad", Hh);
    case Buffer::q_grad: return make("q_grad", Hh);
    case Buffer::k_grad: return make("k_grad", Gh);
    case Buffer::v_grad: return make("v_grad", Gh);
    case Buffer::q_local: return make("q_local", Hh);
    case Buffer::k_local: return make("k_local", Gh);
    case Buffer::v_local: return make("v_local", Gh);
  }
  throw std::logic_error("decoder layer: unknown buffer");
}

template <class T>
void DecoderLayer<T>::project_qkv(const Mat<T>& q, const Mat<T>& k, const Mat<T>& v, const Mat<const T>& x,
                                  const LayerWeights<T>& w, Range r) const {
  const auto pos = Kokkos::subview(pos_, Kokkos::make_pair(r.begin, r.end));
  const std::size_t h = cfg_.head_dim();
  {
    const auto an = workspace(Buffer::attn_in, r.size());  // [C, d]
    kernels::rmsnorm_forward<T>(kernels_, an.view(), x, w.attn_norm, cfg_.norm_eps);
    kernels::gemm(kernels_, Op::N, Op::N, T(1), an.view(), w.wq, T(0), q);
    kernels::gemm(kernels_, Op::N, Op::N, T(1), an.view(), w.wk, T(0), k);
    kernels::gemm(kernels_, Op::N, Op::N, T(1), an.view(), w.wv, T(0), v);
  }
  kernels::rope_forward<T>(q, pos, h, cfg_.rope_theta);
  kernels::rope_forward<T>(k, pos, h, cfg_.rope_theta);
}

template <class T>
void DecoderLayer<T>::forward_attention(const LayerActivations<T>& a, const LayerWeights<T>& w) const {
  const std::int64_t S = a.x.extent(0);
  const AttentionKept<T> kept{a.q, a.k, a.v, a.o_kept};
  if (a.local) {  // q, k, v straight into what the backward reads
    project_qkv(a.q, a.k, a.v, a.x, w, Range{0, S});
    ScopedPhase phase(timers_, Phase::attention);
    attention_.forward(a.o, a.stats, a.q, a.k, a.v, kept);
  } else {  // the strategy keeps its own layout
    project_kept(a, w);
    ScopedPhase phase(timers_, Phase::attention);
    attention_.forward_kept(a.o, a.stats, kept);
  }
  Kokkos::deep_copy(ExecSpace(), a.y, a.x);                              // y = x
  kernels::gemm(kernels_, Op::N, Op::N, T(1), a.o, w.wo, T(1), a.y);     // y += o Wo
}

template <class T>
void DecoderLayer<T>::project_kept(const LayerActivations<T>& a, const LayerWeights<T>& w) const {
  const std::int64_t S = a.x.extent(0);
  const AttentionKept<T> kept{a.q, a.k, a.v, a.o_kept};
  const auto an = workspace(Buffer::attn_in, S);  // [S, d]
  kernels::rmsnorm_forward<T>(kernels_, an.view(), a.x, w.attn_norm, cfg_.norm_eps);
  const Mat<T> weight[3] = {w.wq, w.wk, w.wv};
  for (int i = 0; i < 3; ++i) {  // t = rope(an W_i) (v: no rope), then into the strategy's layout
    const auto t = workspace(kLocalInput[i], S);
    kernels::gemm(kernels_, Op::N, Op::N, T(1), an.view(), weight[i], T(0), t.view());
    if (i < 2) kernels::rope_forward<T>(t.view(), pos_, cfg_.head_dim(), cfg_.rope_theta);
    ScopedPhase phase(timers_, Phase::attention);
    attention_.keep_input(i, t.view(), kept);
  }
}

template <class T>
void DecoderLayer<T>::replay_project_kept(const LayerActivations<T>& a) const {
  const std::int64_t S = a.x.extent(0);
  const AttentionKept<T> kept{a.q, a.k, a.v, a.o_kept};
  const auto an = workspace(Buffer::attn_in, S);
  for (int i = 0; i < 3; ++i) attention_.keep_input(i, workspace(kLocalInput[i], S).view(), kept);
}

template <class T>
void DecoderLayer<T>::recompute_kept(const LayerActivations<T>& a, const LayerWeights<T>& w) const {
  if (a.local) return;  // (the local layout's q, k, v are row tensors)
  project_kept(a, w);
  ScopedPhase phase(timers_, Phase::attention);
  scatter_output(a);
}

template <class T>
void DecoderLayer<T>::replay_recompute_kept(const LayerActivations<T>& a) const {
  if (a.local) return;
  replay_project_kept(a);
  scatter_output(a);
}

template <class T>
void DecoderLayer<T>::replay_forward_attention(const LayerActivations<T>& a) const {
  const std::int64_t S = a.x.extent(0);
  const AttentionKept<T> kept{a.q, a.k, a.v, a.o_kept};
  if (a.local) {
    workspace(Buffer::attn_in, S);
    attention_.forward(a.o, a.stats, a.q, a.k, a.v, kept);
  } else {
    replay_project_kept(a);
    attention_.forward_kept(a.o, a.stats, kept);
  }
}

template <class T>
void DecoderLayer<T>::recompute_rows(const LayerActivations<T>& a, const LayerWeights<T>& w, Range r) const {
  if (r.size() <= 0) return;
  if (a.local)  // (else q, k, v are kept whole)
    project_qkv(rows(a.q, r.begin, r.end), rows(a.k, r.begin, r.end), rows(a.v, r.begin, r.end),
                rows(a.x, r.begin, r.end), w, r);
  const auto y = rows(a.y, r.begin, r.end);
  Kokkos::deep_copy(ExecSpace(), y, rows(a.x, r.begin, r.end));                          // y = x
  kernels::gemm(kernels_, Op::N, Op::N, T(1), rows(a.o, r.begin, r.end), w.wo, T(1), y);  // y += o Wo
  if (a.mlp_saved) mlp_.recompute_rows(a, w, r);
}

template <class T>
void DecoderLayer<T>::replay_recompute_rows(const LayerActivations<T>& a, Range r) const {
  if (r.size() > 0 && a.local) workspace(Buffer::attn_in, r.size());
}

template <class T>
void DecoderLayer<T>::backward(const Mat<T>& dx, const LayerWeights<master_t<T>>& dw, const Mat<const T>& dz,
                               const LayerActivations<T>& a, const LayerWeights<T>& w) const {
  const std::int64_t S = a.x.extent(0);
  const std::size_t h = cfg_.head_dim();

  // MLP block: dy = dz + mlp'(dz)
  const auto dy = workspace(Buffer::y_grad, S);
  Kokkos::deep_copy(ExecSpace(), dy.view(), dz);
  mlp_.backward(dy.view(), dw, dz, a.y, w, a);

  // output projection: dO = dy Wo^T ; dWo += o^T dy
  auto d_o = workspace(Buffer::o_grad, S);
  kernels::gemm(kernels_, Op::N, Op::T, T(1), dy.view(), w.wo, T(0), d_o.view());
  kernels::gemm(kernels_, Op::T, Op::N, T(1), a.o, dy.view(), T(1), dw.wo);

  const auto dq = workspace(Buffer::q_grad, S), dk = workspace(Buffer::k_grad, S),
             dv = workspace(Buffer::v_grad, S);  // the strategies overwrite them
  {
    ScopedPhase phase(timers_, Phase::attention);
    attention_.backward(dq.view(), dk.view(), dv.view(), d_o.view(), a.o_kept, a.stats, a.q, a.k, a.v);
  }
  d_o.reset();
  kernels::rope_backward<T>(dq.view(), pos_, h, cfg_.rope_theta);
  kernels::rope_backward<T>(dk.view(), pos_, h, cfg_.rope_theta);

  // projections: dW* += an^T d* ; dan = dq Wq^T + dk Wk^T + dv Wv^T  (an = rmsnorm(x) recomputed)
  const auto an = workspace(Buffer::attn_in, S);
  kernels::rmsnorm_forward<T>(kernels_, an.view(), a.x, w.attn_norm, cfg_.norm_eps);
  kernels::gemm(kernels_, Op::T, Op::N, T(1), an.view(), dq.view(), T(1), dw.wq);
  kernels::gemm(kernels_, Op::T, Op::N, T(1), an.view(), dk.view(), T(1), dw.wk);
  kernels::gemm(kernels_, Op::T, Op::N, T(1), an.view(), dv.view(), T(1), dw.wv);
  kernels::gemm(kernels_, Op::N, Op::T, T(1), dq.view(), w.wq, T(0), an.view());  // an := dan
  kernels::gemm(kernels_, Op::N, Op::T, T(1), dk.view(), w.wk, T(1), an.view());
  kernels::gemm(kernels_, Op::N, Op::T, T(1), dv.view(), w.wv, T(1), an.view());

  // residual + norm: dx = dy + rmsnorm'(dan)
  Kokkos::deep_copy(ExecSpace(), dx, dy.view());
  kernels::rmsnorm_backward<T>(kernels_, dx, dw.attn_norm, an.view(), a.x, w.attn_norm, cfg_.norm_eps);
}

template <class T>
void DecoderLayer<T>::replay_backward(const LayerActivations<T>& a) const {
  const std::int64_t S = a.x.extent(0);
  const auto dy = workspace(Buffer::y_grad, S);
  mlp_.replay_backward(a);
  auto d_o = workspace(Buffer::o_grad, S);
  const auto dq = workspace(Buffer::q_grad, S), dk = workspace(Buffer::k_grad, S), dv = workspace(Buffer::v_grad, S);
  attention_.backward(dq.view(), dk.view(), dv.view(), d_o.view(), a.o_kept, a.stats, a.q, a.k, a.v);
  d_o.reset();
  const auto an = workspace(Buffer::attn_in, S);
}

template class DecoderLayer<float>;
template class DecoderLayer<double>;
template class DecoderLayer<bf16>;

}  // namespace minilst
