#include "model/mlp_block.hpp"

#include "kernels/bf16.hpp"
#include "kernels/select.hpp"

namespace minilst {

using kernels::Op;

template <class T>
typename MlpBlock<T>::ChunkBuffers MlpBlock<T>::chunk_buffers(std::int64_t C, bool backward) const {
  const std::int64_t d = cfg_.hidden, I = cfg_.intermediate, B = C * tp_.size();
  ChunkBuffers b{workspace("mlp_in", B, d), workspace("mlp_gate", B, I), workspace("mlp_up", B, I), {}};
  if (backward) b.act = workspace("mlp_act", B, I);
  return b;
}

template <class T>
typename MlpBlock<T>::Chunk MlpBlock<T>::chunk(const LayerActivations<T>& keep, std::int64_t S, int M, int c,
                                               bool backward) const {
  Chunk ch;
  ch.r = chunk_range(S, M, c);
  if (keep.mlp_saved) {  // the store's tensors: one chunk, the whole sequence (the group's rows)
    const std::int64_t k = tp_.size();
    const auto part = [&](const Mat<T>& t) -> Mat<T> { return rows(t, k * ch.r.begin, k * ch.r.end); };
    ch.b = part(keep.mlp_in), ch.g = part(keep.mlp_gate), ch.u = part(keep.mlp_up), ch.m = part(keep.mlp_act);
    return ch;
  }
  ch.ws = chunk_buffers(ch.r.size(), backward);
  ch.b = ch.ws.in.view(), ch.g = ch.ws.gate.view(), ch.u = ch.ws.up.view();
  ch.m = backward ? ch.ws.act.view() : ch.g;  // the forward keeps nothing: m := silu(g) u in place
  return ch;
}

template <class T>
void MlpBlock<T>::norm_input(const Mat<T>& b, const Mat<const T>& y, const LayerWeights<T>* w) const {
  if (tp_.split()) {  // the rows' norm, then the group's [T C, d]
    const auto mine = workspace("mlp_norm_part", y.extent(0), cfg_.hidden);
    if (w) kernels::rmsnorm_forward<T>(kernels_, mine.view(), y, w->mlp_norm, cfg_.norm_eps);
    tp_.gather<T>(b, mine.view());
  } else if (w) {
    kernels::rmsnorm_forward<T>(kernels_, b, y, w->mlp_norm, cfg_.norm_eps);
  }
}

template <class T>
void MlpBlock<T>::project(const Mat<T>& b, const Mat<T>& g, const Mat<T>& u, const Mat<T>& m,
                          const LayerWeights<T>& w) const {
  kernels::gemm(kernels_, Op::N, Op::N, T(1), b, w.w_gate, T(0), g);
  kernels::gemm(kernels_, Op::N, Op::N, T(1), b, w.w_up, T(0), u);
  kernels::swiglu_forward<T>(kernels_, m, g, u);
}

template <class T>
void MlpBlock<T>::forward_tensors(const Chunk& ch, const Mat<const T>& y, const LayerWeights<T>* w) const {
  norm_input(ch.b, y, w);
  if (w) project(ch.b, ch.g, ch.u, ch.m, *w);
}

template <class T>
void MlpBlock<T>::add_down(const Chunk& ch, const Mat<T>& z, const LayerActivations<T>& keep,
                           const LayerWeights<T>* w) const {
  if (!tp_.split()) {
    if (w) kernels::gemm(kernels_, Op::N, Op::N, T(1), ch.m, w->w_down, T(1), z);  // z_c += m Wd
    return;
  }
  Tracked<Mat<T>> own;  // m Wd [T C, d]: into b, unless the store keeps b
  Mat<T> partial = ch.b;
  if (keep.mlp_saved) {
    own = workspace("mlp_out_partial", ch.b.extent(0), cfg_.hidden);
    partial = own.view();
  }
  if (w) kernels::gemm(kernels_, Op::N, Op::N, T(1), ch.m, w->w_down, T(0), partial);
  tp_.reduce_scatter<T>(z, partial, true);  // z_c += the group's sum, the chunk's own rows
}

template <class T>
void MlpBlock<T>::forward_chunk(const Chunk& ch, const Mat<T>& z, const Mat<const T>& y, const LayerWeights<T>* w,
                                const LayerActivations<T>& keep) const {
  forward_tensors(ch, y, w);
  add_down(ch, z, keep, w);
}

template <class T>
void MlpBlock<T>::forward(const Mat<T>& z, const Mat<const T>& y, const LayerWeights<T>& w,
                          const LayerActivations<T>& keep) const {
  ScopedPhase phase(timers_, Phase::mlp);
  const std::int64_t S = y.extent(0);
  const int M = chunk_count(keep, S);
  Kokkos::deep_copy(ExecSpace(), z, y);  // residual: z = y + ...
  for (int c = 0; c < M; ++c) {
    const Chunk ch = chunk(keep, S, M, c, false);
    forward_chunk(ch, rows(z, ch.r.begin, ch.r.end), rows(y, ch.r.begin, ch.r.end), &w, keep);
  }
}

template <class T>
void MlpBlock<T>::recompute_rows(const LayerActivations<T>& keep, const LayerWeights<T>* w, Range r) const {
  const Chunk ch = chunk(keep, keep.y.extent(0), 1, 0, true);  // the kept tensors, all their rows
  const auto y = rows(keep.y, r.begin, r.end);
  const auto part = [](const Mat<T>& t, Range s) -> Mat<T> { return rows(t, s.begin, s.end); };
  if (!tp_.split()) {
    norm_input(part(ch.b, r), y, w);
    if (w) project(part(ch.b, r), part(ch.g, r), part(ch.u, r), part(ch.m, r), *w);
    return;
  }
  // the group's rows r of b gathered [T |r|, d], then into their block rows, projected there
  const auto b = workspace("mlp_in_rows", tp_.size() * r.size(), cfg_.hidden);
  norm_input(b.view(), y, w);
  if (!w) return;
  std::int64_t at = 0;
  for (const Range s : tp_.block_segments(r, keep.y.extent(0))) {
    Kokkos::deep_copy(ExecSpace(), part(ch.b, s), rows(b.view(), at, at + s.size()));
    project(part(ch.b, s), part(ch.g, s), part(ch.u, s), part(ch.m, s), *w);
    at += s.size();
  }
}

template <class T>
void MlpBlock<T>::backward_chunk(const Chunk& ch, const Mat<T>& dy, const LayerWeights<master_t<T>>* dw,
                                 const Mat<const T>& dz, const Mat<const T>& y, const LayerWeights<T>* w,
                                 const LayerActivations<T>& keep) const {
  const KernelChoice& K = kernels_;
  const Mat<T> &b = ch.b, &g = ch.g, &u = ch.u, &m = ch.m;
  if (!keep.mlp_saved) forward_tensors(ch, y, w);  // recompute the chunk's forward (else: the store's)
  {
    Tracked<Mat<T>> gathered;  // T > 1: dz of the group's chunk rows [T C, d]
    Mat<const T> dzs = dz;
    if (tp_.split()) {
      gathered = workspace("mlp_out_grad", b.extent(0), cfg_.hidden);
      tp_.gather<T>(gathered.view(), dz);
      dzs = gathered.view();
    }
    if (w) {  // down projection: dWd += m^T dz_c ; dm = dz_c Wd^T (into m)
      kernels::gemm(K, Op::T, Op::N, T(1), m, dzs, T(1), dw->w_down);
      kernels::gemm(K, Op::N, Op::T, T(1), dzs, w->w_down, T(0), m);
    }
  }
  if (w) {
    kernels::swiglu_backward<T>(K, g, u, m, g, u);  // g, u := dg, du
    kernels::gemm(K, Op::T, Op::N, T(1), b, g, T(1), dw->w_gate);
    kernels::gemm(K, Op::T, Op::N, T(1), b, u, T(1), dw->w_up);
    // db = dg Wg^T + du Wu^T (into b, whose forward value is no longer needed)
    kernels::gemm(K, Op::N, Op::T, T(1), g, w->w_gate, T(0), b);
    kernels::gemm(K, Op::N, Op::T, T(1), u, w->w_up, T(1), b);
  }
  Tracked<Mat<T>> mine;  // T > 1: the chunk's own rows of db, summed over the group
  if (tp_.split()) {
    mine = workspace("mlp_in_grad", dy.extent(0), cfg_.hidden);
    tp_.reduce_scatter<T>(mine.view(), b, false);
  }
  if (w) kernels::rmsnorm_backward<T>(K, dy, dw->mlp_norm, tp_.split() ? mine.view() : b, y, w->mlp_norm, cfg_.norm_eps);
}

template <class T>
void MlpBlock<T>::backward(const Mat<T>& dy, const LayerWeights<master_t<T>>& dw, const Mat<const T>& dz,
                           const Mat<const T>& y, const LayerWeights<T>& w, const LayerActivations<T>& keep) const {
  ScopedPhase phase(timers_, Phase::mlp);
  const std::int64_t S = y.extent(0);
  const int M = chunk_count(keep, S);
  for (int c = 0; c < M; ++c) {
    const Chunk ch = chunk(keep, S, M, c, true);
    const Range r = ch.r;
    backward_chunk(ch, rows(dy, r.begin, r.end), &dw, rows(dz, r.begin, r.end), rows(y, r.begin, r.end), &w, keep);
  }
}

// Each chunk's workspace, allocated and freed in the run's order (the chunk buffers none
// when the store keeps the MLP's set); y's extents stand for every [S, d] operand.
template <class T>
void MlpBlock<T>::replay_chunks(const LayerActivations<T>& keep, bool backward) const {
  const std::int64_t S = keep.y.extent(0);
  const int M = chunk_count(keep, S);
  for (int c = 0; c < M; ++c) {
    const Chunk ch = chunk(keep, S, M, c, backward);
    const auto yc = rows(keep.y, ch.r.begin, ch.r.end);
    if (backward) backward_chunk(ch, yc, nullptr, yc, yc, nullptr, keep);
    else forward_chunk(ch, yc, yc, nullptr, keep);
  }
}

template <class T>
void MlpBlock<T>::replay_forward(const LayerActivations<T>& keep) const {
  replay_chunks(keep, false);
}

template <class T>
void MlpBlock<T>::replay_backward(const LayerActivations<T>& keep) const {
  replay_chunks(keep, true);
}

template class MlpBlock<float>;
template class MlpBlock<double>;
template class MlpBlock<bf16>;

}  // namespace minilst
