// Attention on the CPU's matrix unit, bf16 (host builds with oneDNN): the flash
// algorithm of kernels/attention.hpp with the same arguments and results (masked by
// positions: q_lo[i] <= k_pos[j] <= q_pos[i]; GQA, the LSE, the backward's +=), whose tile products are oneDNN bf16
// matmuls with fp32 results (kernels/gemm_onednn.hpp): AMX tiles on Xeons that have
// them, AVX512_BF16 dot products elsewhere. Everything between the products runs in
// fp32 as the portable kernel does (the masks, the online softmax, D, dS); P and dS
// are rounded to bf16 before their products, as FlashAttention rounds them on GPUs.
//   Sq query tokens, Sk key tokens, Hq query heads, Gk kv heads, h head dim.
//   q: [Sq, Hq*h]  k, v: [Sk, Gk*h]  o: [Sq, Hq*h]  lse, delta: [Sq, Hq] (fp32)
//   q_pos, q_lo: [Sq] (q_lo empty: 0 for every query, causal), k_pos: [Sk]
//   tiles  a query block is R rows of each of the group = Hq/Gk query heads that read
//          one kv head, stacked (M = group x R rows, kRows in all); a key block is kKeys
//          keys. K and V blocks are read in place (strided operands); Q, dO, P, dS are
//          packed per block.
//   forward   a task per (kv head, query block):  S = scale Q K^T;  online softmax;
//             O = corr O + P V;  then o = O / sum, lse = max + log sum
//   backward  a task per kv head, key blocks outer, query blocks inner (FlashAttention-2
//             order, every output element one writer, deterministic):
//             S, P = exp(S - lse);  dV += P^T dO;  dP = dO V^T;  dS = P (dP - D);
//             dK += scale dS^T Q;  dq += scale dS K
// Key blocks no query of the block sees (all after its last query, or all before its
// smallest q_lo) are skipped (causal: about half); blocks inside every query's
// interval [q_lo, q_pos] are not masked.
// The run's KernelChoice selects it (attention = onednn; kernels/select.hpp).
#pragma once

#include <cstdint>

#include "bf16.hpp"
#include "types.hpp"

namespace minilst::kernels {

// Whether this build can run it (a host build with oneDNN).
bool attention_onednn_available();

void attention_forward_onednn(const Mat<bf16>& o, const Mat<float>& lse, const Mat<const bf16>& q,
                              const Mat<const bf16>& k, const Mat<const bf16>& v, const Vec<const std::int64_t>& q_pos,
                              const Vec<const std::int64_t>& q_lo, const Vec<const std::int64_t>& k_pos, int head_dim);

// delta: [Sq, Hq] workspace, overwritten with D_i = rowsum(dO_i * O_i).
void attention_backward_onednn(const Mat<bf16>& dq, const Mat<bf16>& dk, const Mat<bf16>& dv, const Mat<float>& delta,
                               const Mat<const bf16>& d_o, const Mat<const bf16>& o, const Mat<const float>& lse,
                               const Mat<const bf16>& q, const Mat<const bf16>& k, const Mat<const bf16>& v,
                               const Vec<const std::int64_t>& q_pos, const Vec<const std::int64_t>& q_lo,
                               const Vec<const std::int64_t>& k_pos, int head_dim);

}  // namespace minilst::kernels
