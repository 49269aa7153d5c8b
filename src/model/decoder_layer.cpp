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
    case Buffer::block_in: return make("block_in", d);
    case Buffer::y_grad: return make("y_grad", d);
    case Buffer::y_grad_all: return make("y_grad_all", d);
    case Buffer::out_partial: return make("out_partial", d);
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
typename DecoderLayer<T>::BlockInput DecoderLayer<T>::block_input(const Mat<const T>& x, const LayerWeights<T>* w) const {
  BlockInput in{workspace(Buffer::attn_in, x.extent(0)), {}};  // [n, d]
  if (w) kernels::rmsnorm_forward<T>(kernels_, in.part.view(), x, w->attn_norm, cfg_.norm_eps);
  if (tp_.split()) {
    in.whole = workspace(Buffer::block_in, block_rows(x.extent(0)));  // [S, d]
    tp_.gather<T>(in.whole.view(), in.part.view());
    in.part.reset();
  }
  return in;
}

template <class T>
void DecoderLayer<T>::add_output(const LayerActivations<T>& a, const Mat<T>* wo, Range r) const {
  const auto y = rows(a.y, r.begin, r.end);
  if (wo) Kokkos::deep_copy(ExecSpace(), y, rows(a.x, r.begin, r.end));            // y = x
  if (!tp_.split()) {
    if (wo) kernels::gemm(kernels_, Op::N, Op::N, T(1), rows(a.o, r.begin, r.end), *wo, T(1), y);  // y += o Wo
    return;
  }
  const auto partial = workspace(Buffer::out_partial, tp_.size() * r.size());  // [T |r|, d] this rank's heads' share
  std::int64_t at = 0;
  for (const Range s : tp_.block_segments(r, a.x.extent(0))) {
    if (wo) kernels::gemm(kernels_, Op::N, Op::N, T(1), rows(a.o, s.begin, s.end), *wo, T(0),
                          rows(partial.view(), at, at + s.size()));
    at += s.size();
  }
  tp_.reduce_scatter<T>(y, partial.view(), true);  // y += the group's sum, rows of its own
}

template <class T>
void DecoderLayer<T>::project_qkv(const LayerActivations<T>& a, const LayerWeights<T>* w, Range r) const {
  const auto segments = tp_.block_segments(r, a.x.extent(0));
  {
    const auto in = block_input(rows(a.x, r.begin, r.end), w);  // [T |r|, d]: rank t's rows r at t |r|
    if (!w) return;
    std::int64_t at = 0;
    for (const Range s : segments) {
      const auto an = rows(in.view(), at, at + s.size());
      kernels::gemm(kernels_, Op::N, Op::N, T(1), an, w->wq, T(0), rows(a.q, s.begin, s.end));
      kernels::gemm(kernels_, Op::N, Op::N, T(1), an, w->wk, T(0), rows(a.k, s.begin, s.end));
      kernels::gemm(kernels_, Op::N, Op::N, T(1), an, w->wv, T(0), rows(a.v, s.begin, s.end));
      at += s.size();
    }
  }
  const std::size_t h = cfg_.head_dim();
  for (const Range s : segments) {
    const auto pos = Kokkos::subview(pos_, Kokkos::make_pair(s.begin, s.end));
    kernels::rope_forward<T>(rows(a.q, s.begin, s.end), pos, h, cfg_.rope_theta);
    kernels::rope_forward<T>(rows(a.k, s.begin, s.end), pos, h, cfg_.rope_theta);
  }
}

template <class T>
void DecoderLayer<T>::forward_attention(const LayerActivations<T>& a, const LayerWeights<T>& w) const {
  const Range all{0, std::int64_t(a.x.extent(0))};
  const AttentionKept<T> kept{a.q, a.k, a.v, a.o_kept};
  if (a.local) {  // q, k, v straight into what the backward reads
    project_qkv(a, &w, all);
    ScopedPhase phase(timers_, Phase::attention);
    attention_.forward(a.o, a.stats, a.q, a.k, a.v, kept);
  } else {  // the strategy keeps its own layout
    project_kept(a, w);
    ScopedPhase phase(timers_, Phase::attention);
    attention_.forward_kept(a.o, a.stats, kept);
  }
  add_output(a, &w.wo, all);  // y = x + o Wo
}

template <class T>
void DecoderLayer<T>::project_kept(const LayerActivations<T>& a, const LayerWeights<T>& w) const {
  const std::int64_t S = block_rows(a.x.extent(0));
  const AttentionKept<T> kept{a.q, a.k, a.v, a.o_kept};
  const auto in = block_input(a.x, &w);  // [S, d]
  const Mat<T> weight[3] = {w.wq, w.wk, w.wv};
  for (int i = 0; i < 3; ++i) {  // t = rope(an W_i) (v: no rope), then into the strategy's layout
    const auto t = workspace(kLocalInput[i], S);
    kernels::gemm(kernels_, Op::N, Op::N, T(1), in.view(), weight[i], T(0), t.view());
    if (i < 2) kernels::rope_forward<T>(t.view(), pos_, cfg_.head_dim(), cfg_.rope_theta);
    ScopedPhase phase(timers_, Phase::attention);
    attention_.keep_input(i, t.view(), kept);
  }
}

template <class T>
void DecoderLayer<T>::replay_project_kept(const LayerActivations<T>& a) const {
  const std::int64_t S = block_rows(a.x.extent(0));
  const AttentionKept<T> kept{a.q, a.k, a.v, a.o_kept};
  const auto in = block_input(a.x, nullptr);
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
  const Range all{0, std::int64_t(a.x.extent(0))};
  const AttentionKept<T> kept{a.q, a.k, a.v, a.o_kept};
  if (a.local) {
    project_qkv(a, nullptr, all);
    attention_.forward(a.o, a.stats, a.q, a.k, a.v, kept);
  } else {
    replay_project_kept(a);
    attention_.forward_kept(a.o, a.stats, kept);
  }
  add_output(a, nullptr, all);
}

template <class T>
void DecoderLayer<T>::token_rows(const LayerActivations<T>& a, const LayerWeights<T>* w, Range r) const {
  if (r.size() <= 0) return;  // (alike on every rank of a group: alpha and n are)
  if (a.local) project_qkv(a, w, r);  // (else q, k, v are kept whole)
  add_output(a, w ? &w->wo : nullptr, r);  // y = x + o Wo
  if (a.mlp_saved) mlp_.recompute_rows(a, w, r);
}

template <class T>
void DecoderLayer<T>::backward(const Mat<T>& dx, const LayerWeights<master_t<T>>& dw, const Mat<const T>& dz,
                               const LayerActivations<T>& a, const LayerWeights<T>& w) const {
  const std::int64_t n = a.x.extent(0), S = block_rows(n);
  const std::size_t h = cfg_.head_dim();

  // MLP block: dy = dz + mlp'(dz)
  const auto dy = workspace(Buffer::y_grad, n);
  Kokkos::deep_copy(ExecSpace(), dy.view(), dz);
  mlp_.backward(dy.view(), dw, dz, a.y, w, a);

  // output projection: dO = dy Wo^T ; dWo += o^T dy  (dy gathered to the group's [S, d] under tensor parallelism)
  auto d_o = workspace(Buffer::o_grad, S);
  {
    Tracked<Mat<T>> gathered;
    Mat<T> dy_all = dy.view();
    if (tp_.split()) {
      gathered = workspace(Buffer::y_grad_all, S);
      tp_.gather<T>(gathered.view(), dy.view());
      dy_all = gathered.view();
    }
    kernels::gemm(kernels_, Op::N, Op::T, T(1), dy_all, w.wo, T(0), d_o.view());
    kernels::gemm(kernels_, Op::T, Op::N, T(1), a.o, dy_all, T(1), dw.wo);
  }

  const auto dq = workspace(Buffer::q_grad, S), dk = workspace(Buffer::k_grad, S),
             dv = workspace(Buffer::v_grad, S);  // the strategies overwrite them
  {
    ScopedPhase phase(timers_, Phase::attention);
    attention_.backward(dq.view(), dk.view(), dv.view(), d_o.view(), a.o_kept, a.stats, a.q, a.k, a.v);
  }
  d_o.reset();
  kernels::rope_backward<T>(dq.view(), pos_, h, cfg_.rope_theta);
  kernels::rope_backward<T>(dk.view(), pos_, h, cfg_.rope_theta);

  // projections: dW* += an^T d* ; dan = dq Wq^T + dk Wk^T + dv Wv^T  (an = rmsnorm(x) recomputed, gathered)
  const auto in = block_input(a.x, &w);
  const Mat<T> an = in.view();
  kernels::gemm(kernels_, Op::T, Op::N, T(1), an, dq.view(), T(1), dw.wq);
  kernels::gemm(kernels_, Op::T, Op::N, T(1), an, dk.view(), T(1), dw.wk);
  kernels::gemm(kernels_, Op::T, Op::N, T(1), an, dv.view(), T(1), dw.wv);
  kernels::gemm(kernels_, Op::N, Op::T, T(1), dq.view(), w.wq, T(0), an);  // an := dan
  kernels::gemm(kernels_, Op::N, Op::T, T(1), dk.view(), w.wk, T(1), an);
  kernels::gemm(kernels_, Op::N, Op::T, T(1), dv.view(), w.wv, T(1), an);
  Tracked<Mat<T>> mine;  // T > 1: this rank's rows of the group's dan, summed over its ranks
  if (tp_.split()) {
    mine = workspace(Buffer::attn_in, n);
    tp_.reduce_scatter<T>(mine.view(), an, false);
  }

  // residual + norm: dx = dy + rmsnorm'(dan)
  Kokkos::deep_copy(ExecSpace(), dx, dy.view());
  kernels::rmsnorm_backward<T>(kernels_, dx, dw.attn_norm, tp_.split() ? mine.view() : an, a.x, w.attn_norm,
                               cfg_.norm_eps);
}

template <class T>
void DecoderLayer<T>::replay_backward(const LayerActivations<T>& a) const {
  const std::int64_t n = a.x.extent(0), S = block_rows(n);
  const auto dy = workspace(Buffer::y_grad, n);
  mlp_.replay_backward(a);
  auto d_o = workspace(Buffer::o_grad, S);
  if (tp_.split()) workspace(Buffer::y_grad_all, S);
  const auto dq = workspace(Buffer::q_grad, S), dk = workspace(Buffer::k_grad, S), dv = workspace(Buffer::v_grad, S);
  attention_.backward(dq.view(), dk.view(), dv.view(), d_o.view(), a.o_kept, a.stats, a.q, a.k, a.v);
  d_o.reset();
  const auto in = block_input(a.x, nullptr);
  if (tp_.split()) {
    const auto mine = workspace(Buffer::attn_in, n);
    tp_.reduce_scatter<T>(mine.view(), in.view(), false);
  }
}

template class DecoderLayer<float>;
template class DecoderLayer<double>;
template class DecoderLayer<bf16>;

}  // namespace minilst
