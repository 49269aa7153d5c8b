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
void MlpBlock<T>::gate_and_up(const Mat<T>& b, const Mat<T>& g, const Mat<T>& u, const Mat<const T>& y,
                              const LayerWeights<T>& w) const {
  kernels::rmsnorm_forward<T>(kernels_, b, y, w.mlp_norm, cfg_.norm_eps);
  kernels::gemm(kernels_, Op::N, Op::N, T(1), b, w.w_gate, T(0), g);
  kernels::gemm(kernels_, Op::N, Op::N, T(1), b, w.w_up, T(0), u);
}

template <class T>
void MlpBlock<T>::forward(const Mat<T>& z, const Mat<const T>& y, const LayerWeights<T>& w,
                          const LayerActivations<T>& keep) const {
  ScopedPhase phase(timers_, Phase::mlp);
  const std::int64_t S = y.extent(0);
  const int M = effective_chunks(S, chunks_);
  const KernelChoice& K = kernels_;
  Kokkos::deep_copy(ExecSpace(), z, y);  // residual: z = y + ...
  if (keep.mlp_saved) {                  // the whole sequence, kept for the backward
    gate_and_up(keep.mlp_in, keep.mlp_gate, keep.mlp_up, y, w);
    kernels::swiglu_forward<T>(K, keep.mlp_act, keep.mlp_gate, keep.mlp_up);
    kernels::gemm(K, Op::N, Op::N, T(1), keep.mlp_act, w.w_down, T(1), z);
    return;
  }
  for (int c = 0; c < M; ++c) {
    const Range r = chunk_range(S, M, c);
    const auto yc = rows(y, r.begin, r.end);
    const auto ws = chunk_buffers(r.size(), false);
    const Mat<T> b = ws.in.view(), g = ws.gate.view(), u = ws.up.view();
    gate_and_up(b, g, u, yc, w);
    kernels::swiglu_forward<T>(K, g, g, u);                                        // g := silu(g) u
    kernels::gemm(K, Op::N, Op::N, T(1), g, w.w_down, T(1), rows(z, r.begin, r.end));  // z_c += m Wd
  }
}

template <class T>
void MlpBlock<T>::recompute_rows(const LayerActivations<T>& keep, const LayerWeights<T>& w, Range r) const {
  const auto part = [&](const Mat<T>& m) { return rows(m, r.begin, r.end); };
  gate_and_up(part(keep.mlp_in), part(keep.mlp_gate), part(keep.mlp_up), part(keep.y), w);
  kernels::swiglu_forward<T>(kernels_, part(keep.mlp_act), part(keep.mlp_gate), part(keep.mlp_up));
}

template <class T>
void MlpBlock<T>::replay_forward(const LayerActivations<T>& keep) const {
  replay_chunks(keep, false);
}

// Each chunk's workspace, allocated and freed in the run's order (none when the store keeps the MLP's set).
template <class T>
void MlpBlock<T>::replay_chunks(const LayerActivations<T>& keep, bool backward) const {
  if (keep.mlp_saved) return;
  const std::int64_t S = keep.y.extent(0);
  const int M = effective_chunks(S, chunks_);
  for (int c = 0; c < M; ++c) chunk_buffers(chunk_range(S, M, c).size(), backward);
}

template <class T>
void MlpBlock<T>::backward(const Mat<T>& dy, const LayerWeights<master_t<T>>& dw, const Mat<const T>& dz,
                           const Mat<const T>& y, const LayerWeights<T>& w, const LayerActivations<T>& keep) const {
  ScopedPhase phase(timers_, Phase::mlp);
  const std::int64_t S = y.extent(0);
  const int M = effective_chunks(S, chunks_);
  const KernelChoice& K = kernels_;
  if (keep.mlp_saved) {  // what the forward kept (then overwritten by gradients)
    const auto &b = keep.mlp_in, &g = keep.mlp_gate, &u = keep.mlp_up, &m = keep.mlp_act;
    kernels::gemm(K, Op::T, Op::N, T(1), m, dz, T(1), dw.w_down);   // dWd += m^T dz
    kernels::gemm(K, Op::N, Op::T, T(1), dz, w.w_down, T(0), m);     // m := dm
    kernels::swiglu_backward<T>(K, g, u, m, g, u);                  // g, u := dg, du
    kernels::gemm(K, Op::T, Op::N, T(1), b, g, T(1), dw.w_gate);
    kernels::gemm(K, Op::T, Op::N, T(1), b, u, T(1), dw.w_up);
    kernels::gemm(K, Op::N, Op::T, T(1), g, w.w_gate, T(0), b);      // b := db
    kernels::gemm(K, Op::N, Op::T, T(1), u, w.w_up, T(1), b);
    kernels::rmsnorm_backward<T>(K, dy, dw.mlp_norm, b, y, w.mlp_norm, cfg_.norm_eps);
    return;
  }
  for (int c = 0; c < M; ++c) {
    const Range r = chunk_range(S, M, c);
    const auto yc = rows(y, r.begin, r.end);
    const auto dzc = rows(dz, r.begin, r.end);
    const auto ws = chunk_buffers(r.size(), true);
    const Mat<T> b = ws.in.view(), g = ws.gate.view(), u = ws.up.view(), m = ws.act.view();
    // recompute the chunk's forward
    gate_and_up(b, g, u, yc, w);
    kernels::swiglu_forward<T>(K, m, g, u);
    // down projection: dWd += m^T dz_c ; dm = dz_c Wd^T (into m)
    kernels::gemm(K, Op::T, Op::N, T(1), m, dzc, T(1), dw.w_down);
    kernels::gemm(K, Op::N, Op::T, T(1), dzc, w.w_down, T(0), m);
    kernels::swiglu_backward<T>(K, g, u, m, g, u);  // g, u := dg, du
    kernels::gemm(K, Op::T, Op::N, T(1), b, g, T(1), dw.w_gate);
    kernels::gemm(K, Op::T, Op::N, T(1), b, u, T(1), dw.w_up);
    // db = dg Wg^T + du Wu^T (into b, whose forward value is no longer needed)
    kernels::gemm(K, Op::N, Op::T, T(1), g, w.w_gate, T(0), b);
    kernels::gemm(K, Op::N, Op::T, T(1), u, w.w_up, T(1), b);
    kernels::rmsnorm_backward<T>(K, rows(dy, r.begin, r.end), dw.mlp_norm, b, yc, w.mlp_norm, cfg_.norm_eps);
  }
}

template <class T>
void MlpBlock<T>::replay_backward(const LayerActivations<T>& keep) const {
  replay_chunks(keep, true);
}

template class MlpBlock<float>;
template class MlpBlock<double>;
template class MlpBlock<bf16>;

}  // namespace minilst
