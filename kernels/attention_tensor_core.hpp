// Attention on the GPU's matrix units (CUDA builds): FlashAttention-2-style
// kernels whose tile products are WMMA tensor-core operations, with the same
// arguments and results as the portable kernel (kernels/attention.hpp: masked by
// positions, key j visible to query i iff q_lo[i] <= k_pos[j] <= q_pos[i], q_lo empty
// meaning causal; GQA, the LSE, += backward), so every layout and the ring merge use
// it unchanged.
//   operands  bf16 (m16 n16 k16), or tf32 (m16 n16 k8) for fp32 runs that ask for
//             it; products and softmax statistics in fp32; P and dS rounded to the
//             operand type before their products, as FlashAttention does
//   forward   a block of 4 warps per (64 query rows, query head); each warp owns 16
//             rows: S = Q K^T for 64 keys at a time, online softmax in exp2, O += P V,
//             O kept in fp32 shared memory (rescaled per row by the lanes)
//   backward  deterministic, without atomics, in two kernels (every output
//             element has one writer):
//               dK, dV  a block per (64 keys, kv head); each warp owns 16 keys and
//                       accumulates their dK, dV in registers over the group's query
//                       heads and all query rows, 32 at a time
//               dQ      a block per (64 query rows, query head), over the keys
//             Both recompute S and dP: 7 tile products where an atomic dQ needs 5.
//   skipping  a key block that no query of the block sees (its keys all after the
//             block's last query, or all before its smallest q_lo) is skipped (causal:
//             about half of them), whatever the layout
// Head dims 16, 32, 64, 128 (one instantiation each); the shared memory of the
// largest kernel must fit the device's per-block limit (tensor_core_fits). The run's
// KernelChoice (attention = tensor_core) selects them (kernels/select.hpp).
#pragma once

#include <Kokkos_Core.hpp>

#include <string>
#include <type_traits>

#include "bf16.hpp"
#include "types.hpp"

namespace minilst::kernels {

constexpr bool tensor_core_head_dim(int h) { return h == 16 || h == 32 || h == 64 || h == 128; }

#ifdef KOKKOS_ENABLE_CUDA
// Whether the kernels for operands of `operand_bytes` (2: bf16, 4: tf32) and head
// dim h fit the current device's shared memory per block.
bool tensor_core_fits(int operand_bytes, int head_dim);

template <class T>
void attention_forward_tensor_core(const Mat<T>& o, const Mat<accum_t<T>>& lse, const Mat<const T>& q,
                                   const Mat<const T>& k, const Mat<const T>& v,
                                   const Vec<const std::int64_t>& q_pos, const Vec<const std::int64_t>& q_lo,
                                   const Vec<const std::int64_t>& k_pos, int head_dim);
template <class T>
void attention_backward_tensor_core(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv,
                                    const Mat<accum_t<T>>& delta, const Mat<const T>& d_o, const Mat<const T>& o,
                                    const Mat<const accum_t<T>>& lse, const Mat<const T>& q, const Mat<const T>& k,
                                    const Mat<const T>& v, const Vec<const std::int64_t>& q_pos,
                                    const Vec<const std::int64_t>& q_lo, const Vec<const std::int64_t>& k_pos,
                                    int head_dim);
#endif

// Why the tensor-core kernels cannot run a T problem of head dim h on this build
// and device ("" when they can).
template <class T>
std::string tensor_core_unavailable(int head_dim) {
#ifdef KOKKOS_ENABLE_CUDA
  if (!std::is_same<T, bf16>::value && !std::is_same<T, float>::value)
    return "the tensor-core kernels take bf16 or fp32 (tf32) operands, not fp64";
  if (!tensor_core_head_dim(head_dim))
    return "the tensor-core kernels are built for head dims 16, 32, 64, 128 (model.hidden / model.heads = " +
           std::to_string(head_dim) + ")";
  if (!tensor_core_fits(int(sizeof(T)), head_dim))
    return "the tensor-core kernels' shared memory exceeds this GPU's per-block limit at head dim " +
           std::to_string(head_dim);
  return "";
#else
  (void)head_dim;
  return "the tensor-core kernels need a CUDA build (this build's execution space: " +
         std::string(ExecSpace::name()) + ")";
#endif
}

}  // namespace minilst::kernels
