// The tensor-core attention kernels (kernels/attention_tensor_core.hpp: the
// method, the shapes, the guarantees). Compiled only where Kokkos has CUDA.
//
// Conventions of this file:
//   E        the operand type in shared memory (__nv_bfloat16 or float for tf32);
//            global bf16 has the same 16 bits and is copied as bits
//   tiles    row-major in shared memory, rows padded by 16 bytes (bank spread;
//            keeps every 16-row fragment 32-byte aligned, as WMMA requires)
//   S2       scores in log2 units, S2 = log2(e) q.k / sqrt(h), so exp is exp2
//   lanes    in a warp's softmax, lane l owns the even (l even) or odd columns of
//            row l / 2 of its 16-row strip: the two lanes of a row touch adjacent
//            words, which halves the bank conflicts of contiguous halves
#include "kernels/attention_tensor_core.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace minilst::kernels {

namespace {
namespace wmma = nvcuda::wmma;

constexpr int kWarps = 4;  // warps per block
constexpr int kThreads = 32 * kWarps;
constexpr int kStrip = 16;                // rows a warp owns (one fragment high)
constexpr int kRows = kWarps * kStrip;    // query rows (forward, dQ) or keys (dK dV) per block
constexpr int kKeys = 64;                 // keys per step (forward, dQ)
constexpr int kQueries = 32;              // query rows per step (dK dV)
constexpr unsigned kFull = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr std::int64_t kNoKey = INT64_MAX;    // a padding key: visible to no query
constexpr std::int64_t kNoQuery = INT64_MIN;  // a padding query: sees no key

// The operands of the tile products for a run computing in T.
template <class T> struct Operand;
template <> struct Operand<bf16> {
  using E = __nv_bfloat16;
  using Precision = __nv_bfloat16;  // WMMA's type tag
  static constexpr int K = 16;      // m16 n16 k16
  __device__ static E round(float x) { return __float2bfloat16_rn(x); }
};
template <> struct Operand<float> {
  using E = float;
  using Precision = wmma::precision::tf32;
  static constexpr int K = 8;  // m16 n16 k8
  __device__ static E round(float x) { return wmma::__float_to_tf32(x); }  // as P V will multiply it
};

template <class O> using FragA = wmma::fragment<wmma::matrix_a, 16, 16, O::K, typename O::Precision, wmma::row_major>;
template <class O> using FragB = wmma::fragment<wmma::matrix_b, 16, 16, O::K, typename O::Precision, wmma::row_major>;
template <class O> using FragBt = wmma::fragment<wmma::matrix_b, 16, 16, O::K, typename O::Precision, wmma::col_major>;
template <class O> using FragC = wmma::fragment<wmma::accumulator, 16, 16, O::K, float>;

template <class O, class F>
__device__ void load_operand(F& f, const typename O::E* p, int ld) {
  wmma::load_matrix_sync(f, p, ld);
  if constexpr (std::is_same<typename O::Precision, wmma::precision::tf32>::value)
    for (int i = 0; i < f.num_elements; ++i) f.x[i] = wmma::__float_to_tf32(f.x[i]);
}

// acc += A B^T: A [16, k] and B [16, k], row-major in shared memory (B^T read as
// a column-major matrix_b).
template <class O>
__device__ void mma_abt(FragC<O>& acc, const typename O::E* a, int lda, const typename O::E* b, int ldb, int k) {
  FragA<O> fa;
  FragBt<O> fb;
  for (int k0 = 0; k0 < k; k0 += O::K) {
    load_operand<O>(fa, a + k0, lda);
    load_operand<O>(fb, b + k0, ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

// acc += A B: A [16, k], B [k, 16], row-major in shared memory.
template <class O>
__device__ void mma_ab(FragC<O>& acc, const typename O::E* a, int lda, const typename O::E* b, int ldb, int k) {
  FragA<O> fa;
  FragB<O> fb;
  for (int k0 = 0; k0 < k; k0 += O::K) {
    load_operand<O>(fa, a + k0, lda);
    load_operand<O>(fb, b + std::int64_t(k0) * ldb, ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

// Leading dimensions (elements) of padded tiles: 16 bytes of padding per row.
template <class E> constexpr int padded(int cols) { return cols + 16 / int(sizeof(E)); }

// Shared memory, carved in order; every region starts 128-byte aligned. The
// kernels carve their block's memory with it, and the host carves from 0 with
// the same code to learn how much to ask for (shared_bytes).
struct Carver {
  std::uintptr_t base;
  int offset = 0;
  template <class X>
  __host__ __device__ X* take(int count) {
    X* p = reinterpret_cast<X*>(base + offset);
    offset += (count * int(sizeof(X)) + 127) / 128 * 128;
    return p;
  }
};
template <class Tiles>
int shared_bytes() {
  Carver c{0};
  Tiles tiles(c);
  return c.offset;
}

// dst[r, 0:H) = src[r, 0:H) for r < valid, 0 below, for `rows` rows, 16 bytes per
// thread and step (src rows 16-byte aligned: checked by the host code).
template <int H, class T, class E>
__device__ void load_rows(E* dst, int ldd, const T* src, std::int64_t lds, int rows, int valid) {
  static_assert(sizeof(T) == sizeof(E), "operands are copied as bits");
  constexpr int per = 16 / int(sizeof(T));
  constexpr int per_row = H / per;
  for (int idx = threadIdx.x; idx < rows * per_row; idx += blockDim.x) {
    const int r = idx / per_row, c = idx % per_row * per;
    uint4 bits = make_uint4(0, 0, 0, 0);
    if (r < valid) bits = *reinterpret_cast<const uint4*>(src + r * lds + c);
    *reinterpret_cast<uint4*>(dst + r * ldd + c) = bits;
  }
}

// Positions of rows [b, b + valid) into pos[0, n), `pad` below; returns nothing
// (callers synchronise, then read lo/hi with block_range).
__device__ void load_positions(std::int64_t* pos, const std::int64_t* src, int b, int n, int valid, std::int64_t pad) {
  for (int t = threadIdx.x; t < n; t += blockDim.x) pos[t] = t < valid ? src[b + t] : pad;
}
// First visible positions q_lo of query rows [b, b + valid) into lo[0, n): 0 below, and
// 0 everywhere when src is null (causal). A padding row's q_pos (kNoQuery) masks it already.
__device__ void load_lower_bounds(std::int64_t* lo, const std::int64_t* src, int b, int n, int valid) {
  for (int t = threadIdx.x; t < n; t += blockDim.x) lo[t] = t < valid && src ? src[b + t] : 0;
}
__device__ std::int64_t lowest(const std::int64_t* pos, int valid) {  // every thread reads all: a broadcast
  std::int64_t lo = kNoKey;
  for (int t = 0; t < valid; ++t) lo = pos[t] < lo ? pos[t] : lo;
  return lo;
}
__device__ std::int64_t highest(const std::int64_t* pos, int valid) {
  std::int64_t hi = kNoQuery;
  for (int t = 0; t < valid; ++t) hi = pos[t] > hi ? pos[t] : hi;
  return hi;
}
// Whether no query of a block (positions up to q_hi, first visible positions from
// lo_min) sees any key of a block [k_lo, k_hi]: the same answer in every thread.
__device__ bool nothing_visible(std::int64_t k_lo, std::int64_t k_hi, std::int64_t q_hi, std::int64_t lo_min) {
  return k_lo > q_hi || k_hi < lo_min;
}
__device__ bool visible(std::int64_t key, std::int64_t query, std::int64_t lo) { return key <= query && key >= lo; }

// The problem, as raw pointers and row strides (elements).
template <class T>
struct Problem {
  const T *q, *k, *v, *d_o, *o;
  const float* lse;  // [Sq, Hq], natural log
  const std::int64_t *q_pos, *k_pos;
  const std::int64_t* q_lo;  // [Sq] first visible positions, or null: 0 for every query (causal)
  std::int64_t ldq, ldk, ldv, ldo, ldlse;  // d_o and dq share q's stride, dk, dv k's (checked)
  int Sq, Sk, Hq, Gk;
  float scale;  // 1 / sqrt(h)
};

// ---------------------------------------------------------------- forward

template <class O, int H>
struct ForwardLayout {
  using E = typename O::E;
  static constexpr int ldx = padded<E>(H), lds = padded<float>(kKeys), ldp = padded<E>(kKeys), ldo = padded<float>(H);
  E *Qs, *Ks, *Vs;       // [64, H] each
  float* Ss;             // S, per warp [16, 64]
  E* Ps;                 // P, per warp [16, 64]
  float* Os;             // O [64, H]
  std::int64_t *qp, *kp;  // positions [64] each
  std::int64_t* ql;       // the queries' first visible positions [64]
  __host__ __device__ explicit ForwardLayout(Carver& c)
      : Qs(c.take<E>(kRows * ldx)), Ks(c.take<E>(kRows * ldx)), Vs(c.take<E>(kRows * ldx)),
        Ss(c.take<float>(kRows * lds)), Ps(c.take<E>(kRows * ldp)), Os(c.take<float>(kRows * ldo)),
        qp(c.take<std::int64_t>(kRows)), kp(c.take<std::int64_t>(kRows)), ql(c.take<std::int64_t>(kRows)) {}
};

template <class T, int H>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(Problem<T> p, T* out, float* lse_out) {
  using O = Operand<T>;
  using E = typename O::E;
  using L = ForwardLayout<O, H>;
  extern __shared__ __align__(128) unsigned char smem[];
  Carver carve{reinterpret_cast<std::uintptr_t>(smem)};
  const L tiles(carve);
  E *Qs = tiles.Qs, *Ks = tiles.Ks, *Vs = tiles.Vs, *Ps = tiles.Ps;
  float *Ss = tiles.Ss, *Os = tiles.Os;
  std::int64_t *qp = tiles.qp, *kp = tiles.kp, *ql = tiles.ql;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = blockIdx.y, g = n / (p.Hq / p.Gk);
  const int i0 = blockIdx.x * kRows, nq = min(kRows, p.Sq - i0);
  load_rows<H>(Qs, L::ldx, p.q + i0 * p.ldq + n * H, p.ldq, kRows, nq);
  load_positions(qp, p.q_pos, i0, kRows, nq, kNoQuery);
  load_lower_bounds(ql, p.q_lo, i0, kRows, nq);
  for (int t = threadIdx.x; t < kRows * L::ldo; t += blockDim.x) Os[t] = 0.f;
  __syncthreads();
  const std::int64_t q_hi = highest(qp, nq), lo_min = lowest(ql, nq);

  const int r = lane / 2, half = lane % 2;  // this lane: strip row r, keys of parity `half`, half `half` of O's row
  const int row = warp * kStrip + r;
  const std::int64_t pos = qp[row], lo = ql[row];
  const float scale2 = p.scale * kLog2e;
  const float neg_inf = -INFINITY;
  float m = neg_inf, l = 0.f;  // the row's running max (S2 units) and sum
  float* Sw = Ss + warp * kStrip * L::lds;
  E* Pw = Ps + warp * kStrip * L::ldp;
  float* Ow = Os + warp * kStrip * L::ldo;

  for (int j0 = 0; j0 < p.Sk; j0 += kKeys) {
    const int nk = min(kKeys, p.Sk - j0);
    __syncthreads();  // every warp is done with the previous K, V, positions
    load_positions(kp, p.k_pos, j0, kKeys, nk, kNoKey);
    __syncthreads();
    if (nothing_visible(lowest(kp, nk), highest(kp, nk), q_hi, lo_min)) continue;  // the same answer in every thread
    load_rows<H>(Ks, L::ldx, p.k + j0 * p.ldk + g * H, p.ldk, kKeys, nk);
    load_rows<H>(Vs, L::ldx, p.v + j0 * p.ldv + g * H, p.ldv, kKeys, nk);
    __syncthreads();

    for (int t = 0; t < kKeys / 16; ++t) {  // S = Q K^T, the warp's 16 rows x 64 keys
      FragC<O> acc;
      wmma::fill_fragment(acc, 0.f);
      mma_abt<O>(acc, Qs + warp * kStrip * L::ldx, L::ldx, Ks + t * 16 * L::ldx, L::ldx, H);
      wmma::store_matrix_sync(Sw + t * 16, acc, L::lds, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax of row r over this lane's 32 keys (columns half, half + 2, ...);
    // the pair of lanes of a row combine their max and sum by a shuffle.
    float* s = Sw + r * L::lds;
    float mx = neg_inf;
    for (int c = half; c < kKeys; c += 2) {
      const float x = visible(kp[c], pos, lo) ? s[c] * scale2 : neg_inf;
      s[c] = x;
      mx = fmaxf(mx, x);
    }
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
    const float m_new = fmaxf(m, mx);
    const float base = m_new == neg_inf ? 0.f : m_new;  // a row that sees nothing yet: exp2(-inf) = 0
    const float corr = exp2f(m - base);
    float sum = 0.f;
    E* pr = Pw + r * L::ldp;
    for (int c = half; c < kKeys; c += 2) {
      const E e = O::round(exp2f(s[c] - base));
      pr[c] = e;
      sum += float(e);  // the rounded weights P V multiplies, so O stays normalised
    }
    sum += __shfl_xor_sync(kFull, sum, 1);
    l = l * corr + sum;
    m = m_new;
    float* orow = Ow + r * L::ldo + half * (H / 2);
    for (int c = 0; c < H / 2; ++c) orow[c] *= corr;
    __syncwarp();
    for (int t = 0; t < H / 16; ++t) {  // O += P V, column tile t
      FragC<O> acc;
      wmma::load_matrix_sync(acc, Ow + t * 16, L::ldo, wmma::mem_row_major);
      mma_ab<O>(acc, Pw, L::ldp, Vs + t * 16, L::ldx, kKeys);
      wmma::store_matrix_sync(Ow + t * 16, acc, L::ldo, wmma::mem_row_major);
    }
    __syncwarp();
  }

  const std::int64_t i = i0 + row;
  if (i >= p.Sq) return;
  const float inv = l > 0.f ? 1.f / l : 0.f;
  const float* orow = Ow + r * L::ldo + half * (H / 2);
  T* dst = out + i * p.ldq + n * H + half * (H / 2);
  for (int c = 0; c < H / 2; ++c) dst[c] = T(orow[c] * inv);
  if (half == 0) lse_out[i * p.ldlse + n] = l > 0.f ? (m + log2f(l)) * kLn2 : neg_inf;
}

// ---------------------------------------------------------------- backward

// D_i = rowsum(dO_i * O_i) per (row, head): a warp per pair.
template <class T, int H>
__global__ void __launch_bounds__(kThreads) attention_delta_kernel(Problem<T> p, float* delta) {
  const std::int64_t pair = std::int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (pair >= std::int64_t(p.Sq) * p.Hq) return;
  const std::int64_t i = pair / p.Hq;
  const int n = int(pair % p.Hq), lane = threadIdx.x % 32;
  float s = 0.f;
  for (int c = lane; c < H; c += 32) s += float(p.d_o[i * p.ldq + n * H + c]) * float(p.o[i * p.ldo + n * H + c]);
  for (int w = 16; w > 0; w /= 2) s += __shfl_xor_sync(kFull, s, w);
  if (lane == 0) delta[i * p.ldlse + n] = s;
}

// The log-sum-exp (S2 units) and D of query rows [i0, i0 + n) of head `head`
// (padding and rows that saw no key: lse2 = -inf, which zeroes their P).
template <class T>
__device__ void load_row_stats(float* lse2, float* D, const Problem<T>& p, const float* delta, int i0, int n, int valid,
                               int head) {
  for (int t = threadIdx.x; t < n; t += blockDim.x) {
    const bool in = t < valid;
    lse2[t] = in ? p.lse[(i0 + t) * p.ldlse + head] * kLog2e : -INFINITY;
    D[t] = in ? delta[(i0 + t) * p.ldlse + head] : 0.f;
  }
}

// P and dS of one score element: P = exp2(S2 - lse2) where the key is visible,
// dS = P (dP - D).
struct Grad {
  float p, ds;
};
__device__ Grad softmax_grad(float s, float dp, float scale2, float lse2, float D, bool unmasked) {
  const float pr = unmasked && lse2 != -INFINITY ? exp2f(s * scale2 - lse2) : 0.f;
  return {pr, pr * (dp - D)};
}

// dst[r, c] += scale * acc for the rows < valid, through the warp's fp32 scratch
// `stage` [16, >= 16] (ld).
template <class O, class T>
__device__ void add_fragment(T* dst, std::int64_t ldd, int valid, float scale, const FragC<O>& acc, float* stage,
                             int ld) {
  wmma::store_matrix_sync(stage, acc, ld, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x % 32;
  for (int e = lane; e < 256; e += 32) {
    const int r = e / 16, c = e % 16;
    if (r < valid) {
      T& d = dst[r * ldd + c];
      d = T(float(d) + scale * stage[r * ld + c]);
    }
  }
  __syncwarp();
}

template <class O, int H>
struct DkDvLayout {
  using E = typename O::E;
  static constexpr int ldx = padded<E>(H), lds = padded<float>(kQueries), ldp = padded<E>(kQueries);
  E *Ks, *Vs;            // [64 keys, H]
  E *Qs, *dOs;           // [32 queries, H]
  float *St, *dPt;       // S^T, dP^T, per warp [16 keys, 32 queries]
  E *Pt, *dSt;           // P^T, dS^T, per warp [16 keys, 32 queries]
  float *lse2, *D;       // [32 queries]
  std::int64_t *qp, *kp;  // [32], [64]
  std::int64_t* ql;       // the queries' first visible positions [32]
  __host__ __device__ explicit DkDvLayout(Carver& c)
      : Ks(c.take<E>(kRows * ldx)), Vs(c.take<E>(kRows * ldx)), Qs(c.take<E>(kQueries * ldx)),
        dOs(c.take<E>(kQueries * ldx)), St(c.take<float>(kRows * lds)), dPt(c.take<float>(kRows * lds)),
        Pt(c.take<E>(kRows * ldp)), dSt(c.take<E>(kRows * ldp)), lse2(c.take<float>(kQueries)),
        D(c.take<float>(kQueries)), qp(c.take<std::int64_t>(kQueries)), kp(c.take<std::int64_t>(kRows)),
        ql(c.take<std::int64_t>(kQueries)) {}
};

template <class T, int H>
__global__ void __launch_bounds__(kThreads)
    attention_dkdv_kernel(Problem<T> p, const float* delta, T* dk, T* dv) {
  using O = Operand<T>;
  using E = typename O::E;
  using L = DkDvLayout<O, H>;
  extern __shared__ __align__(128) unsigned char smem[];
  Carver carve{reinterpret_cast<std::uintptr_t>(smem)};
  const L tiles(carve);
  E *Ks = tiles.Ks, *Vs = tiles.Vs, *Qs = tiles.Qs, *dOs = tiles.dOs, *Pt = tiles.Pt, *dSt = tiles.dSt;
  float *St = tiles.St, *dPt = tiles.dPt, *lse2 = tiles.lse2, *D = tiles.D;
  std::int64_t *qp = tiles.qp, *kp = tiles.kp, *ql = tiles.ql;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = blockIdx.y, group = p.Hq / p.Gk;
  const int j0 = blockIdx.x * kRows, nk = min(kRows, p.Sk - j0);
  load_rows<H>(Ks, L::ldx, p.k + j0 * p.ldk + g * H, p.ldk, kRows, nk);
  load_rows<H>(Vs, L::ldx, p.v + j0 * p.ldv + g * H, p.ldv, kRows, nk);
  load_positions(kp, p.k_pos, j0, kRows, nk, kNoKey);
  __syncthreads();
  const std::int64_t k_lo = lowest(kp, nk), k_hi = highest(kp, nk);
  const float scale2 = p.scale * kLog2e;

  const E* Kw = Ks + warp * kStrip * L::ldx;
  const E* Vw = Vs + warp * kStrip * L::ldx;
  float* Sw = St + warp * kStrip * L::lds;
  float* dPw = dPt + warp * kStrip * L::lds;
  E* Pw = Pt + warp * kStrip * L::ldp;
  E* dSw = dSt + warp * kStrip * L::ldp;
  const int r = lane / 2, half = lane % 2;  // this lane: key row r of the strip, every other query
  const std::int64_t key_pos = kp[warp * kStrip + r];

  FragC<O> dK[H / 16], dV[H / 16];
#pragma unroll
  for (int t = 0; t < H / 16; ++t) {
    wmma::fill_fragment(dK[t], 0.f);
    wmma::fill_fragment(dV[t], 0.f);
  }
  for (int e = 0; e < group; ++e) {
    const int n = g * group + e;
    for (int i0 = 0; i0 < p.Sq; i0 += kQueries) {
      const int nq = min(kQueries, p.Sq - i0);
      __syncthreads();  // every warp is done with the previous queries
      load_positions(qp, p.q_pos, i0, kQueries, nq, kNoQuery);
      load_lower_bounds(ql, p.q_lo, i0, kQueries, nq);
      __syncthreads();
      if (nothing_visible(k_lo, k_hi, highest(qp, nq), lowest(ql, nq))) continue;
      load_rows<H>(Qs, L::ldx, p.q + i0 * p.ldq + n * H, p.ldq, kQueries, nq);
      load_rows<H>(dOs, L::ldx, p.d_o + i0 * p.ldq + n * H, p.ldq, kQueries, nq);
      load_row_stats(lse2, D, p, delta, i0, kQueries, nq, n);
      __syncthreads();

      for (int t = 0; t < kQueries / 16; ++t) {  // S^T = K Q^T, dP^T = V dO^T: 16 keys x 32 queries
        FragC<O> acc;
        wmma::fill_fragment(acc, 0.f);
        mma_abt<O>(acc, Kw, L::ldx, Qs + t * 16 * L::ldx, L::ldx, H);
        wmma::store_matrix_sync(Sw + t * 16, acc, L::lds, wmma::mem_row_major);
        wmma::fill_fragment(acc, 0.f);
        mma_abt<O>(acc, Vw, L::ldx, dOs + t * 16 * L::ldx, L::ldx, H);
        wmma::store_matrix_sync(dPw + t * 16, acc, L::lds, wmma::mem_row_major);
      }
      __syncwarp();
      for (int c = half; c < kQueries; c += 2) {
        const Grad gr = softmax_grad(Sw[r * L::lds + c], dPw[r * L::lds + c], scale2, lse2[c], D[c],
                                     visible(key_pos, qp[c], ql[c]));
        Pw[r * L::ldp + c] = O::round(gr.p);
        dSw[r * L::ldp + c] = O::round(gr.ds);
      }
      __syncwarp();
#pragma unroll
      for (int t = 0; t < H / 16; ++t) {  // dV += P^T dO, dK += dS^T Q (scaled at the end)
        mma_ab<O>(dV[t], Pw, L::ldp, dOs + t * 16, L::ldx, kQueries);
        mma_ab<O>(dK[t], dSw, L::ldp, Qs + t * 16, L::ldx, kQueries);
      }
    }
  }
  const int rows = min(kStrip, nk - warp * kStrip);  // keys of the strip inside the sequence
  if (rows <= 0) return;
  const std::int64_t first = j0 + warp * kStrip;
#pragma unroll
  for (int t = 0; t < H / 16; ++t) {
    add_fragment<O>(dk + first * p.ldk + g * H + t * 16, p.ldk, rows, p.scale, dK[t], Sw, L::lds);
    add_fragment<O>(dv + first * p.ldv + g * H + t * 16, p.ldv, rows, 1.f, dV[t], Sw, L::lds);
  }
}

template <class O, int H>
struct DqLayout {
  using E = typename O::E;
  static constexpr int ldx = padded<E>(H), lds = padded<float>(kKeys), ldp = padded<E>(kKeys);
  E *Qs, *dOs, *Ks, *Vs;  // [64, H] each
  float *Ss, *dPs;        // S, dP, per warp [16, 64]
  E* dSs;                 // dS, per warp [16, 64]
  float *lse2, *D;        // [64 queries]
  std::int64_t *qp, *kp;  // [64] each
  std::int64_t* ql;       // the queries' first visible positions [64]
  __host__ __device__ explicit DqLayout(Carver& c)
      : Qs(c.take<E>(kRows * ldx)), dOs(c.take<E>(kRows * ldx)), Ks(c.take<E>(kRows * ldx)),
        Vs(c.take<E>(kRows * ldx)), Ss(c.take<float>(kRows * lds)), dPs(c.take<float>(kRows * lds)),
        dSs(c.take<E>(kRows * ldp)), lse2(c.take<float>(kRows)), D(c.take<float>(kRows)),
        qp(c.take<std::int64_t>(kRows)), kp(c.take<std::int64_t>(kRows)), ql(c.take<std::int64_t>(kRows)) {}
};

template <class T, int H>
__global__ void __launch_bounds__(kThreads) attention_dq_kernel(Problem<T> p, const float* delta, T* dq) {
  using O = Operand<T>;
  using E = typename O::E;
  using L = DqLayout<O, H>;
  extern __shared__ __align__(128) unsigned char smem[];
  Carver carve{reinterpret_cast<std::uintptr_t>(smem)};
  const L tiles(carve);
  E *Qs = tiles.Qs, *dOs = tiles.dOs, *Ks = tiles.Ks, *Vs = tiles.Vs, *dSs = tiles.dSs;
  float *Ss = tiles.Ss, *dPs = tiles.dPs, *lse2 = tiles.lse2, *D = tiles.D;
  std::int64_t *qp = tiles.qp, *kp = tiles.kp, *ql = tiles.ql;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = blockIdx.y, g = n / (p.Hq / p.Gk);
  const int i0 = blockIdx.x * kRows, nq = min(kRows, p.Sq - i0);
  load_rows<H>(Qs, L::ldx, p.q + i0 * p.ldq + n * H, p.ldq, kRows, nq);
  load_rows<H>(dOs, L::ldx, p.d_o + i0 * p.ldq + n * H, p.ldq, kRows, nq);
  load_positions(qp, p.q_pos, i0, kRows, nq, kNoQuery);
  load_lower_bounds(ql, p.q_lo, i0, kRows, nq);
  load_row_stats(lse2, D, p, delta, i0, kRows, nq, n);
  __syncthreads();
  const std::int64_t q_hi = highest(qp, nq), lo_min = lowest(ql, nq);
  const float scale2 = p.scale * kLog2e;

  const int r = lane / 2, half = lane % 2;  // this lane: strip row r, keys of parity `half`
  const int row = warp * kStrip + r;
  float* Sw = Ss + warp * kStrip * L::lds;
  float* dPw = dPs + warp * kStrip * L::lds;
  E* dSw = dSs + warp * kStrip * L::ldp;
  FragC<O> dQ[H / 16];
#pragma unroll
  for (int t = 0; t < H / 16; ++t) wmma::fill_fragment(dQ[t], 0.f);

  for (int j0 = 0; j0 < p.Sk; j0 += kKeys) {
    const int nk = min(kKeys, p.Sk - j0);
    __syncthreads();
    load_positions(kp, p.k_pos, j0, kKeys, nk, kNoKey);
    __syncthreads();
    if (nothing_visible(lowest(kp, nk), highest(kp, nk), q_hi, lo_min)) continue;
    load_rows<H>(Ks, L::ldx, p.k + j0 * p.ldk + g * H, p.ldk, kKeys, nk);
    load_rows<H>(Vs, L::ldx, p.v + j0 * p.ldv + g * H, p.ldv, kKeys, nk);
    __syncthreads();

    for (int t = 0; t < kKeys / 16; ++t) {  // S = Q K^T, dP = dO V^T: 16 rows x 64 keys
      FragC<O> acc;
      wmma::fill_fragment(acc, 0.f);
      mma_abt<O>(acc, Qs + warp * kStrip * L::ldx, L::ldx, Ks + t * 16 * L::ldx, L::ldx, H);
      wmma::store_matrix_sync(Sw + t * 16, acc, L::lds, wmma::mem_row_major);
      wmma::fill_fragment(acc, 0.f);
      mma_abt<O>(acc, dOs + warp * kStrip * L::ldx, L::ldx, Vs + t * 16 * L::ldx, L::ldx, H);
      wmma::store_matrix_sync(dPw + t * 16, acc, L::lds, wmma::mem_row_major);
    }
    __syncwarp();
    for (int c = half; c < kKeys; c += 2) {
      const Grad gr = softmax_grad(Sw[r * L::lds + c], dPw[r * L::lds + c], scale2, lse2[row], D[row],
                                   visible(kp[c], qp[row], ql[row]));
      dSw[r * L::ldp + c] = O::round(gr.ds);
    }
    __syncwarp();
#pragma unroll
    for (int t = 0; t < H / 16; ++t) mma_ab<O>(dQ[t], dSw, L::ldp, Ks + t * 16, L::ldx, kKeys);  // dQ += dS K
  }
  const int rows = min(kStrip, nq - warp * kStrip);
  if (rows <= 0) return;
  const std::int64_t first = i0 + warp * kStrip;
#pragma unroll
  for (int t = 0; t < H / 16; ++t) add_fragment<O>(dq + first * p.ldq + n * H + t * 16, p.ldq, rows, p.scale, dQ[t], Sw, L::lds);
}

// ---------------------------------------------------------------- host side

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("attention (tensor cores): ") + what + ": " + cudaGetErrorString(e));
}

int shared_limit() {  // the device's opt-in shared memory per block
  int device = 0, bytes = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
  return bytes;
}

template <class T, int H>
int largest_layout() {
  using O = Operand<T>;
  const int f = shared_bytes<ForwardLayout<O, H>>(), a = shared_bytes<DkDvLayout<O, H>>(),
            b = shared_bytes<DqLayout<O, H>>();
  return f > a ? (f > b ? f : b) : (a > b ? a : b);
}

// Lets `kernel` use `bytes` of shared memory (above the 48 KiB default); once per
// kernel and process (one GPU per rank).
template <class Kernel>
bool opt_in(Kernel kernel, int bytes, const char* which) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
        (std::string("cudaFuncSetAttribute (") + which + ")").c_str());
  return true;
}

template <class T>
Problem<T> problem(const Mat<const T>& q, const Mat<const T>& k, const Mat<const T>& v, const T* d_o, const T* o,
                   const float* lse, std::int64_t ldlse, const Vec<const std::int64_t>& q_pos,
                   const Vec<const std::int64_t>& q_lo, const Vec<const std::int64_t>& k_pos, int h) {
  const auto aligned = [](const void* ptr, std::int64_t ld) {
    return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0 && ld * std::int64_t(sizeof(T)) % 16 == 0;
  };
  if (!aligned(q.data(), q.stride(0)) || !aligned(k.data(), k.stride(0)) || !aligned(v.data(), v.stride(0)))
    throw std::logic_error("attention (tensor cores): q, k, v rows must start on 16-byte boundaries");
  Problem<T> p{};
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.d_o = d_o;
  p.o = o;
  p.lse = lse;
  p.q_pos = q_pos.data();
  p.k_pos = k_pos.data();
  p.q_lo = q_lo.extent(0) > 0 ? q_lo.data() : nullptr;
  p.ldq = std::int64_t(q.stride(0));
  p.ldk = std::int64_t(k.stride(0));
  p.ldv = std::int64_t(v.stride(0));
  p.ldo = p.ldq;
  p.ldlse = ldlse;
  p.Sq = int(q.extent(0));
  p.Sk = int(k.extent(0));
  p.Hq = int(q.extent(1)) / h;
  p.Gk = int(k.extent(1)) / h;
  p.scale = 1.f / sqrtf(float(h));
  return p;
}

template <class T, int H>
void forward(const Problem<T>& p, T* o, float* lse, cudaStream_t stream) {
  const int bytes = shared_bytes<ForwardLayout<Operand<T>, H>>();
  const dim3 grid((p.Sq + kRows - 1) / kRows, p.Hq);
  if (grid.x == 0) return;
  static const bool opted_in = opt_in(attention_forward_kernel<T, H>, bytes, "forward");
  (void)opted_in;
  attention_forward_kernel<T, H><<<grid, kThreads, bytes, stream>>>(p, o, lse);
  check(cudaGetLastError(), "forward launch");
}

template <class T, int H>
void backward(const Problem<T>& p, float* delta, T* dq, T* dk, T* dv, cudaStream_t stream) {
  using O = Operand<T>;
  const std::int64_t pairs = std::int64_t(p.Sq) * p.Hq;
  attention_delta_kernel<T, H><<<unsigned((pairs + kWarps - 1) / kWarps), kThreads, 0, stream>>>(p, delta);
  check(cudaGetLastError(), "delta launch");
  const int kv_bytes = shared_bytes<DkDvLayout<O, H>>(), q_bytes = shared_bytes<DqLayout<O, H>>();
  static const bool opted_in = opt_in(attention_dkdv_kernel<T, H>, kv_bytes, "dK dV") &&
                               opt_in(attention_dq_kernel<T, H>, q_bytes, "dQ");
  (void)opted_in;
  attention_dkdv_kernel<T, H><<<dim3((p.Sk + kRows - 1) / kRows, p.Gk), kThreads, kv_bytes, stream>>>(p, delta, dk, dv);
  check(cudaGetLastError(), "dK dV launch");
  attention_dq_kernel<T, H><<<dim3((p.Sq + kRows - 1) / kRows, p.Hq), kThreads, q_bytes, stream>>>(p, delta, dq);
  check(cudaGetLastError(), "dQ launch");
}

// f<H>() for the run's head dim.
template <class F>
void for_head_dim(int h, F&& f) {
  switch (h) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: throw std::invalid_argument("attention (tensor cores): no kernel for head dim " + std::to_string(h));
  }
}

cudaStream_t compute_stream() { return ExecSpace().cuda_stream(); }
}  // namespace

bool tensor_core_fits(int operand_bytes, int head_dim) {
  if (!tensor_core_head_dim(head_dim)) return false;
  static const int limit = shared_limit();
  int bytes = 0;
  for_head_dim(head_dim, [&](auto H) {
    bytes = operand_bytes == 2 ? largest_layout<bf16, decltype(H)::value>() : largest_layout<float, decltype(H)::value>();
  });
  return bytes <= limit;
}

template <class T>
void attention_forward_tensor_core(const Mat<T>& o, const Mat<accum_t<T>>& lse, const Mat<const T>& q,
                                   const Mat<const T>& k, const Mat<const T>& v,
                                   const Vec<const std::int64_t>& q_pos, const Vec<const std::int64_t>& q_lo,
                                   const Vec<const std::int64_t>& k_pos, int head_dim) {
  if (q.extent(0) == 0) return;
  if (o.stride(0) != q.stride(0))
    throw std::logic_error("attention (tensor cores): o must have q's row stride");
  const auto p =
      problem<T>(q, k, v, nullptr, nullptr, nullptr, std::int64_t(lse.stride(0)), q_pos, q_lo, k_pos, head_dim);
  for_head_dim(head_dim, [&](auto H) { forward<T, decltype(H)::value>(p, o.data(), lse.data(), compute_stream()); });
}

template <class T>
void attention_backward_tensor_core(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv,
                                    const Mat<accum_t<T>>& delta, const Mat<const T>& d_o, const Mat<const T>& o,
                                    const Mat<const accum_t<T>>& lse, const Mat<const T>& q, const Mat<const T>& k,
                                    const Mat<const T>& v, const Vec<const std::int64_t>& q_pos,
                                    const Vec<const std::int64_t>& q_lo, const Vec<const std::int64_t>& k_pos,
                                    int head_dim) {
  if (q.extent(0) == 0 || k.extent(0) == 0) return;
  if (d_o.stride(0) != q.stride(0) || o.stride(0) != q.stride(0) || dq.stride(0) != q.stride(0) ||
      dk.stride(0) != k.stride(0) || dv.stride(0) != v.stride(0) || delta.stride(0) != lse.stride(0))
    throw std::logic_error("attention (tensor cores): gradients must have their inputs' row strides");
  if (reinterpret_cast<std::uintptr_t>(d_o.data()) % 16 != 0)
    throw std::logic_error("attention (tensor cores): dO rows must start on 16-byte boundaries");
  const auto p = problem<T>(q, k, v, d_o.data(), o.data(), lse.data(), std::int64_t(lse.stride(0)), q_pos, q_lo,
                            k_pos, head_dim);
  for_head_dim(head_dim, [&](auto H) {
    backward<T, decltype(H)::value>(p, delta.data(), dq.data(), dk.data(), dv.data(), compute_stream());
  });
}

#define MINILST_TENSOR_CORE_ATTENTION(T)                                                                          \
  template void attention_forward_tensor_core<T>(const Mat<T>&, const Mat<accum_t<T>>&, const Mat<const T>&,     \
                                                 const Mat<const T>&, const Mat<const T>&,                        \
                                                 const Vec<const std::int64_t>&, const Vec<const std::int64_t>&,  \
                                                 const Vec<const std::int64_t>&, int);                            \
  template void attention_backward_tensor_core<T>(                                                                \
      const Mat<T>&, const Mat<T>&, const Mat<T>&, const Mat<accum_t<T>>&, const Mat<const T>&,                   \
      const Mat<const T>&, const Mat<const accum_t<T>>&, const Mat<const T>&, const Mat<const T>&,                \
      const Mat<const T>&, const Vec<const std::int64_t>&, const Vec<const std::int64_t>&,                        \
      const Vec<const std::int64_t>&, int);
MINILST_TENSOR_CORE_ATTENTION(bf16)
MINILST_TENSOR_CORE_ATTENTION(float)
#undef MINILST_TENSOR_CORE_ATTENTION

}  // namespace minilst::kernels
