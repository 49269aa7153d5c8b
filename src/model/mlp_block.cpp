#include "model/mlp_block.hpp"

#include "kernels/bf16.hpp"
#include "kernels/select.hpp"

namespace minilst {

using kernels::Op;

template <class T>
typename MlpBlock<T>::ChunkBuffers MlpBlock<T>::chunk_buffers(std::int64_t C, bool backward) const {
  const auto ws = MemCategory::workspace;
  const std::int64_t d = cfg_.hidden, I = cfg_.intermediate;
  ChunkBuffers b{Tracked<Mat<T>>(uninitialized, "mlp_in", ws, C, d), Tracked<Mat<T>>(uninitialized, "mlp_gate", ws, C, I),
                 Tracked<Mat<T>>(uninitialized, "mlp_up", ws, C, I), {}};
  if (backward) b.act = Tracked<Mat<T>>(uninitialized, "mlp_act", ws, C, I);
  return b;
}

template <class T>
typename MlpBlock<T>::Chunk MlpBlock<T>::chunk(const LayerActivations<T>& keep, std::int64_t S, int M, int c,
                                               bool backward) const {
  Chunk ch;
  ch.r = chunk_range(S, M, c);
  if (keep.mlp_saved) {  // the store's tensors: one chunk, the whole sequence
    const auto part = [&](const Mat<T>& t) -> Mat<T> { return rows(t, ch.r.begin, ch.r.end); };
    ch.b = part(keep.mlp_in), ch.g = part(keep.mlp_gate), ch.u = part(keep.mlp_up), ch.m = part(keep.mlp_act);
    return ch;
  }
  ch.ws = chunk_buffers(ch.r.size(), backward);
  ch.b = ch.ws.in.view(), ch.g = ch.ws.gate.view(), ch.u = ch.ws.up.view();
  ch.m = backward ? ch.ws.act.view() : ch.g;  // the forward keeps nothing: m := silu(g) u in place
  return ch;
}

template <class T>
void MlpBlock<T>::forward_tensors(const Chunk& ch, const Mat<const T>& y, const LayerWeights<T>& w) const {
  kernels::rmsnorm_forward<T>(kernels_, ch.b, y, w.mlp_norm, cfg_.norm_eps);
  kernels::gemm(kernels_, Op::N, Op::N, T(1), ch.b, w.w_gate, T(0), ch.g);
  kernels::gemm(kernels_, Op::N, Op::N, T(1), ch.b, w.w_up, T(0), ch.u);
  kernels::swiglu_forward<T>(kernels_, ch.m, ch.g, ch.u);
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
    forward_tensors(ch, rows(y, ch.r.begin, ch.r.end), w);
    kernels::gemm(kernels_, Op::N, Op::N, T(1), ch.m, w.w_down, T(1), rows(z, ch.r.begin, ch.r.end));  // z_c += m Wd
  }
}

template <class T>
void MlpBlock<T>::recompute_rows(const LayerActivations<T>& keep, const LayerWeights<T>& w, Range r) const {
  Chunk ch = chunk(keep, keep.y.extent(0), 1, 0, true);  // the kept tensors, then their rows r
  for (Mat<T>* t : {&ch.b, &ch.g, &ch.u, &ch.m}) *t = rows(*t, r.begin, r.end);
  forward_tensors(ch, rows(keep.y, r.begin, r.end), w);
}

template <class T>
void MlpBlock<T>::backward(const Mat<T>& dy, const LayerWeights<master_t<T>>& dw, const Mat<const T>& dz,
                           const Mat<const T>& y, const LayerWeights<T>& w, const LayerActivations<T>& keep) const {
  ScopedPhase phase(timers_, Phase::mlp);
  const std::int64_t S = y.extent(0);
  const int M = chunk_count(keep, S);
  const KernelChoice& K = kernels_;
  for (int c = 0; c < M; ++c) {
    const Chunk ch = chunk(keep, S, M, c, true);
    const auto yc = rows(y, ch.r.begin, ch.r.end);
    const auto dzc = rows(dz, ch.r.begin, ch.r.end);
    const Mat<T> &b = ch.b, &g = ch.g, &u = ch.u, &m = ch.m;
    if (!keep.mlp_saved) forward_tensors(ch, yc, w);  // recompute the chunk's forward (else: the store's)
    // down projection: dWd += m^T dz_c ; dm = dz_c Wd^T (into m)
    kernels::gemm(K, Op::T, Op::N, T(1), m, dzc, T(1), dw.w_down);
    kernels::gemm(K, Op::N, Op::T, T(1), dzc, w.w_down, T(0), m);
    kernels::swiglu_backward<T>(K, g, u, m, g, u);  // g, u := dg, du
    kernels::gemm(K, Op::T, Op::N, T(1), b, g, T(1), dw.w_gate);
    kernels::gemm(K, Op::T, Op::N, T(1), b, u, T(1), dw.w_up);
    // db = dg Wg^T + du Wu^T (into b, whose forward value is no longer needed)
    kernels::gemm(K, Op::N, Op::T, T(1), g, w.w_gate, T(0), b);
    kernels::gemm(K, Op::N, Op::T, T(1), u, w.w_up, T(1), b);
    kernels::rmsnorm_backward<T>(K, rows(dy, ch.r.begin, ch.r.end), dw.mlp_norm, b, yc, w.mlp_norm, cfg_.norm_eps);
  }
}

// Each chunk's workspace, allocated and freed in the run's order (none when the store keeps the MLP's set).
template <class T>
void MlpBlock<T>::replay_chunks(const LayerActivations<T>& keep, bool backward) const {
  const std::int64_t S = keep.y.extent(0);
  const int M = chunk_count(keep, S);
  for (int c = 0; c < M; ++c) chunk(keep, S, M, c, backward);
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
