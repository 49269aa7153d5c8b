#include "model/mlp_block.hpp"

#include "kernels/gemm.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/swiglu.hpp"

namespace minilst {

using kernels::gemm;
using kernels::Op;

template <class T>
void MlpBlock<T>::forward(const Mat<T>& z, const Mat<const T>& y, const LayerWeights<T>& w,
                          const LayerActivations<T>& keep) const {
  ScopedPhase phase(timers_, "mlp");
  const std::int64_t S = y.extent(0);
  const int M = effective_chunks(S, chunks_);
  Kokkos::deep_copy(ExecSpace(), z, y);  // residual: z = y + ...
  if (keep.mlp_gate.extent(0) > 0) {     // vanilla: the whole sequence, kept for the backward
    kernels::rmsnorm_forward<T>(keep.mlp_in, y, w.mlp_norm, cfg_.norm_eps);
    gemm(Op::N, Op::N, T(1), keep.mlp_in, w.w_gate, T(0), keep.mlp_gate);
    gemm(Op::N, Op::N, T(1), keep.mlp_in, w.w_up, T(0), keep.mlp_up);
    kernels::swiglu_forward<T>(keep.mlp_act, keep.mlp_gate, keep.mlp_up);
    gemm(Op::N, Op::N, T(1), keep.mlp_act, w.w_down, T(1), z);
    return;
  }
  for (int c = 0; c < M; ++c) {
    const Range r = chunk_range(S, M, c);
    const auto yc = rows(y, r.begin, r.end);
    Tracked<Mat<T>> b(uninitialized, "mlp_in", MemCategory::workspace, r.size(), cfg_.hidden);          // [C, d]
    Tracked<Mat<T>> g(uninitialized, "mlp_gate", MemCategory::workspace, r.size(), cfg_.intermediate);  // [C, I]
    Tracked<Mat<T>> u(uninitialized, "mlp_up", MemCategory::workspace, r.size(), cfg_.intermediate);    // [C, I]
    kernels::rmsnorm_forward<T>(b.view(), yc, w.mlp_norm, cfg_.norm_eps);
    gemm(Op::N, Op::N, T(1), b.view(), w.w_gate, T(0), g.view());
    gemm(Op::N, Op::N, T(1), b.view(), w.w_up, T(0), u.view());
    kernels::swiglu_forward<T>(g.view(), g.view(), u.view());                       // g := silu(g) u
    gemm(Op::N, Op::N, T(1), g.view(), w.w_down, T(1), rows(z, r.begin, r.end));    // z_c += m Wd
  }
}

template <class T>
void MlpBlock<T>::backward(const Mat<T>& dy, const LayerWeights<T>& dw, const Mat<const T>& dz,
                           const Mat<const T>& y, const LayerWeights<T>& w, const LayerActivations<T>& keep) const {
  ScopedPhase phase(timers_, "mlp");
  const std::int64_t S = y.extent(0);
  const int M = effective_chunks(S, chunks_);
  if (keep.mlp_gate.extent(0) > 0) {  // vanilla: what the forward kept (then overwritten by gradients)
    const auto &b = keep.mlp_in, &g = keep.mlp_gate, &u = keep.mlp_up, &m = keep.mlp_act;
    gemm(Op::T, Op::N, T(1), m, dz, T(1), dw.w_down);             // dWd += m^T dz
    gemm(Op::N, Op::T, T(1), dz, w.w_down, T(0), m);               // m := dm
    kernels::swiglu_backward<T>(g, u, m, g, u);                    // g, u := dg, du
    gemm(Op::T, Op::N, T(1), b, g, T(1), dw.w_gate);
    gemm(Op::T, Op::N, T(1), b, u, T(1), dw.w_up);
    gemm(Op::N, Op::T, T(1), g, w.w_gate, T(0), b);                // b := db
    gemm(Op::N, Op::T, T(1), u, w.w_up, T(1), b);
    kernels::rmsnorm_backward<T>(dy, dw.mlp_norm, b, y, w.mlp_norm, cfg_.norm_eps);
    return;
  }
  for (int c = 0; c < M; ++c) {
    const Range r = chunk_range(S, M, c);
    const auto yc = rows(y, r.begin, r.end);
    const auto dzc = rows(dz, r.begin, r.end);
    const std::size_t C = r.size(), d = cfg_.hidden, I = cfg_.intermediate;
    Tracked<Mat<T>> b(uninitialized, "mlp_in", MemCategory::workspace, C, d);
    Tracked<Mat<T>> g(uninitialized, "mlp_gate", MemCategory::workspace, C, I);
    Tracked<Mat<T>> u(uninitialized, "mlp_up", MemCategory::workspace, C, I);
    Tracked<Mat<T>> m(uninitialized, "mlp_act", MemCategory::workspace, C, I);
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
    kernels::rmsnorm_backward<T>(rows(dy, r.begin, r.end), dw.mlp_norm, b.view(), yc, w.mlp_norm, cfg_.norm_eps);
  }
}

template class MlpBlock<float>;
template class MlpBlock<double>;

}  // namespace minilst
