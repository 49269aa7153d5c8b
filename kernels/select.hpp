// The kernels a run calls, as its KernelChoice says (kernel_choice.hpp): each forwards
// to the optimised kernel or to its plain reference (variant), with the same
// arguments; the GEMM by the chosen path of its precision, the optimised attention by
// the chosen kernel (portable; tensor_core on CUDA builds; onednn for bf16 on hosts). Kernels without a
// reference (rope, adamw, the embedding's forward, attention_merge, RSA's phases) are
// the obvious loop already and are called directly.
#pragma once

#include <stdexcept>

#include "attention.hpp"
#include "attention_reference.hpp"
#include "attention_onednn.hpp"
#include "attention_tensor_core.hpp"
#include "cross_entropy.hpp"
#include "cross_entropy_reference.hpp"
#include "embedding.hpp"
#include "embedding_reference.hpp"
#include "gemm.hpp"
#include "gemm_reference.hpp"
#include "rmsnorm.hpp"
#include "rmsnorm_reference.hpp"
#include "swiglu.hpp"
#include "swiglu_reference.hpp"
#include "kernel_choice.hpp"

namespace minilst::kernels {

inline bool plain(const KernelChoice& k) { return k.variant == KernelVariant::reference; }

template <class T, class AV, class BV, class CV>
void gemm(const KernelChoice& k, Op op_a, Op op_b, T alpha, const AV& A, const BV& B, T beta, const CV& C) {
  plain(k) ? gemm_reference(op_a, op_b, alpha, A, B, beta, C) : gemm_optimized(k, op_a, op_b, alpha, A, B, beta, C);
}

inline void check_resolved(AttentionKernel a) {
  if (a == AttentionKernel::automatic) throw std::logic_error("attention: the attention kernel was never resolved");
}

template <class T>
void rmsnorm_forward(const KernelChoice& kc, const Mat<T>& y, const Mat<const T>& x, const Vec<const T>& w, double eps) {
  plain(kc) ? rmsnorm_forward_reference<T>(y, x, w, eps) : rmsnorm_forward<T>(y, x, w, eps);
}
template <class T>
void rmsnorm_backward(const KernelChoice& kc, const Mat<T>& dx, const Vec<master_t<T>>& dw, const Mat<T>& dy, const Mat<const T>& x,
                      const Vec<const T>& w, double eps) {
  plain(kc) ? rmsnorm_backward_reference<T>(dx, dw, dy, x, w, eps) : rmsnorm_backward<T>(dx, dw, dy, x, w, eps);
}

template <class T>
void swiglu_forward(const KernelChoice& kc, const Mat<T>& m, const Mat<const T>& g, const Mat<const T>& u) {
  plain(kc) ? swiglu_forward_reference<T>(m, g, u) : swiglu_forward<T>(m, g, u);
}
template <class T>
void swiglu_backward(const KernelChoice& kc, const Mat<T>& dg, const Mat<T>& du, const Mat<const T>& dm,
                     const Mat<const T>& g, const Mat<const T>& u) {
  plain(kc) ? swiglu_backward_reference<T>(dg, du, dm, g, u) : swiglu_backward<T>(dg, du, dm, g, u);
}

template <class T>
double cross_entropy_fused(const KernelChoice& kc, const Mat<T>& logits, const Vec<const std::int64_t>& labels,
                           double grad_scale) {
  return plain(kc) ? cross_entropy_fused_reference<T>(logits, labels, grad_scale)
                  : cross_entropy_fused<T>(logits, labels, grad_scale);
}

template <class T>
void embedding_backward(const KernelChoice& kc, const Mat<master_t<T>>& dE, const Vec<const std::int64_t>& tokens,
                        const Mat<const T>& dx, std::int64_t v0 = 0) {
  plain(kc) ? embedding_backward_reference<T>(dE, tokens, dx, v0) : embedding_backward<T>(dE, tokens, dx, v0);
}

// q_pos, q_lo: [Sq], k_pos: [Sk]: key j is visible to query i iff q_lo[i] <= k_pos[j] <= q_pos[i]
// (q_lo empty: causal); every kernel below takes the same arguments (attention.hpp).
template <class T>
void attention_forward(const KernelChoice& kc, const Mat<T>& o, const Mat<accum_t<T>>& lse, const Mat<const T>& q,
                       const Mat<const T>& k, const Mat<const T>& v_, const Vec<const std::int64_t>& q_pos,
                       const Vec<const std::int64_t>& q_lo, const Vec<const std::int64_t>& k_pos, int head_dim) {
  if (plain(kc)) return attention_forward_reference<T>(o, lse, q, k, v_, q_pos, q_lo, k_pos, head_dim);
  check_resolved(kc.attention);
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same<T, bf16>::value || std::is_same<T, float>::value)
    if (kc.attention == AttentionKernel::tensor_core)
      return attention_forward_tensor_core<T>(o, lse, q, k, v_, q_pos, q_lo, k_pos, head_dim);
#endif
  if constexpr (std::is_same<T, bf16>::value && Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible)
    if (kc.attention == AttentionKernel::onednn)
      return attention_forward_onednn(o, lse, q, k, v_, q_pos, q_lo, k_pos, head_dim);
  attention_forward<T>(o, lse, q, k, v_, q_pos, q_lo, k_pos, head_dim);
}
template <class T>
void attention_backward(const KernelChoice& kc, const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv,
                        const Mat<accum_t<T>>& delta, const Mat<const T>& d_o, const Mat<const T>& o,
                        const Mat<const accum_t<T>>& lse, const Mat<const T>& q, const Mat<const T>& k,
                        const Mat<const T>& v_, const Vec<const std::int64_t>& q_pos,
                        const Vec<const std::int64_t>& q_lo, const Vec<const std::int64_t>& k_pos, int head_dim) {
  if (plain(kc))
    return attention_backward_reference<T>(dq, dk, dv, delta, d_o, o, lse, q, k, v_, q_pos, q_lo, k_pos, head_dim);
  check_resolved(kc.attention);
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same<T, bf16>::value || std::is_same<T, float>::value)
    if (kc.attention == AttentionKernel::tensor_core)
      return attention_backward_tensor_core<T>(dq, dk, dv, delta, d_o, o, lse, q, k, v_, q_pos, q_lo, k_pos,
                                               head_dim);
#endif
  if constexpr (std::is_same<T, bf16>::value && Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible)
    if (kc.attention == AttentionKernel::onednn)
      return attention_backward_onednn(dq, dk, dv, delta, d_o, o, lse, q, k, v_, q_pos, q_lo, k_pos, head_dim);
  attention_backward<T>(dq, dk, dv, delta, d_o, o, lse, q, k, v_, q_pos, q_lo, k_pos, head_dim);
}

}  // namespace minilst::kernels
