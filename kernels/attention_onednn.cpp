#include "kernels/attention_onednn.hpp"

#include <stdexcept>

#ifdef MINILST_HAVE_ONEDNN
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/gemm_onednn.hpp"
#include "kernels/tile_ops.hpp"
#endif

namespace minilst::kernels {

#ifdef MINILST_HAVE_ONEDNN
namespace {

using Host = Kokkos::DefaultHostExecutionSpace;
constexpr int kRows = 256;  // stacked query rows of a block (all heads of a group)
constexpr int kKeys = 256;  // keys of a block; also the row stride of the score tiles
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The geometry of a problem.
struct Geometry {
  int Sq, Sk, Hq, Gk, h, group, R, n_qb, n_kb;
  std::size_t ldq, ldk;  // elements between rows of q (and o, dq, dO) and of k (and v, dk, dv)
  float scale;
  Geometry(int sq, int sk, int hq, int gk, int head_dim)
      : Sq(sq), Sk(sk), Hq(hq), Gk(gk), h(head_dim), group(hq / gk), R(std::max(1, kRows / (hq / gk))),
        n_qb((sq + R - 1) / R), n_kb((sk + kKeys - 1) / kKeys), ldq(std::size_t(hq) * head_dim),
        ldk(std::size_t(gk) * head_dim), scale(1.0f / std::sqrt(float(head_dim))) {}
};

// The smallest and largest position of [b, b + n).
std::pair<std::int64_t, std::int64_t> range_of(const std::int64_t* pos, int b, int n) {
  const auto [lo, hi] = std::minmax_element(pos + b, pos + b + n);
  return {*lo, *hi};
}
// The same of the first visible positions q_lo (null: 0 for every query, causal).
std::pair<std::int64_t, std::int64_t> lo_range_of(const std::int64_t* q_lo, int b, int n) {
  return q_lo ? range_of(q_lo, b, n) : std::pair<std::int64_t, std::int64_t>{0, 0};
}
std::int64_t first_visible(const std::int64_t* q_lo, int i) { return q_lo ? q_lo[i] : 0; }

// A key block [k_lo, k_hi] against a query block's positions [q_min, q_max] and first
// visible positions [lo_min, lo_max]: no query sees any key, or every query every key.
bool nothing_visible(std::int64_t k_lo, std::int64_t k_hi, std::int64_t q_max, std::int64_t lo_min) {
  return k_lo > q_max || k_hi < lo_min;
}
bool all_visible(std::int64_t k_lo, std::int64_t k_hi, std::int64_t q_min, std::int64_t lo_max) {
  return k_hi <= q_min && k_lo >= lo_max;
}

// A thread's buffers, grown on demand and kept (outside the memory plan, like the BLAS's own).
struct Scratch {
  std::vector<bf16> Q, dO, P, dS;
  std::vector<float> S, dP, O, dK, dV, mx, sum, corr, lse, D;
  std::vector<std::int64_t> pos;
  static Scratch& mine() {
    thread_local Scratch s;
    return s;
  }
};
template <class V>
typename V::value_type* sized(V& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Rows rho = e nq + r of a stacked block: query i0 + r of head g group + e. Packs `src`
// ([Sq, Hq h], bf16) into `dst` [M, h].
void pack_rows(bf16* dst, const bf16* src, const Geometry& G, int g, int i0, int nq) {
  for (int e = 0; e < G.group; ++e)
    for (int r = 0; r < nq; ++r)
      std::copy_n(src + std::size_t(i0 + r) * G.ldq + std::size_t(g * G.group + e) * G.h, G.h,
                  dst + std::size_t(e * nq + r) * G.h);
}

// One (kv head, query block) of the forward.
void forward_block(const Geometry& G, int g, int qb, bf16* o, float* lse, const bf16* q, const bf16* k, const bf16* v,
                   const std::int64_t* q_pos, const std::int64_t* q_lo, const std::int64_t* k_pos) {
  const int h = G.h, i0 = qb * G.R, nq = std::min(G.R, G.Sq - i0), M = G.group * nq;
  Scratch& s = Scratch::mine();
  bf16* Q = sized(s.Q, std::size_t(M) * h);
  bf16* P = sized(s.P, std::size_t(M) * kKeys);
  float* S = sized(s.S, std::size_t(M) * kKeys);
  float* O = sized(s.O, std::size_t(M) * h);
  float* mx = sized(s.mx, M);
  float* sum = sized(s.sum, M);
  pack_rows(Q, q, G, g, i0, nq);
  std::fill_n(O, std::size_t(M) * h, 0.0f);
  std::fill_n(mx, M, kNegInf);
  std::fill_n(sum, M, 0.0f);
  const auto [q_min, q_max] = range_of(q_pos, i0, nq);
  const auto [lo_min, lo_max] = lo_range_of(q_lo, i0, nq);
  for (int kb = 0; kb < G.n_kb; ++kb) {
    const int j0 = kb * kKeys, nk = std::min(kKeys, G.Sk - j0);
    const auto [k_lo, k_hi] = range_of(k_pos, j0, nk);
    if (nothing_visible(k_lo, k_hi, q_max, lo_min)) continue;
    const bool masked = !all_visible(k_lo, k_hi, q_min, lo_max);
    const bf16* K = k + std::size_t(j0) * G.ldk + std::size_t(g) * h;
    const bf16* V = v + std::size_t(j0) * G.ldk + std::size_t(g) * h;
    gemm_onednn_bf16(false, true, M, nk, h, G.scale, Q, h, K, G.ldk, 0.0f, S, nullptr, kKeys);  // S = scale Q K^T
    for (int rho = 0; rho < M; ++rho) {  // masked online softmax of the row; O rescaled
      float* srow = S + std::size_t(rho) * kKeys;
      if (masked) {  // a block on a mask edge: the keys outside [q_lo, q_pos] of this query
        const std::int64_t qp = q_pos[i0 + rho % nq], lo = first_visible(q_lo, i0 + rho % nq);
        const std::int64_t* kp = k_pos + j0;
#pragma omp simd
        for (int t = 0; t < nk; ++t) srow[t] = kp[t] <= qp && kp[t] >= lo ? srow[t] : kNegInf;
      }
      float m = mx[rho];
#pragma omp simd reduction(max : m)
      for (int t = 0; t < nk; ++t) m = m > srow[t] ? m : srow[t];
      bf16* prow = P + std::size_t(rho) * kKeys;
      if (m == kNegInf) {  // nothing visible to this row yet
        std::fill_n(prow, nk, bf16(0.0f));
        continue;
      }
      const float corr = mx[rho] == kNegInf ? 0.0f : tile::exp(mx[rho] - m);
      float add = 0;
#pragma omp simd reduction(+ : add)
      for (int t = 0; t < nk; ++t) {
        const float p = tile::exp(srow[t] - m);
        add += p;
        prow[t] = bf16(p);
      }
      sum[rho] = sum[rho] * corr + add;
      mx[rho] = m;
      float* orow = O + std::size_t(rho) * h;
#pragma omp simd
      for (int c = 0; c < h; ++c) orow[c] *= corr;
    }
    gemm_onednn_bf16(false, false, M, h, nk, 1.0f, P, kKeys, V, G.ldk, 1.0f, O, nullptr, h);  // O += P V
  }
  for (int rho = 0; rho < M; ++rho) {
    const int e = rho / nq, r = rho % nq, n = g * G.group + e;
    const float inv = sum[rho] > 0 ? 1.0f / sum[rho] : 0.0f;
    bf16* out = o + std::size_t(i0 + r) * G.ldq + std::size_t(n) * h;
    for (int c = 0; c < h; ++c) out[c] = bf16(O[std::size_t(rho) * h + c] * inv);
    lse[std::size_t(i0 + r) * G.Hq + n] = sum[rho] > 0 ? mx[rho] + std::log(sum[rho]) : kNegInf;
  }
}

// One query block of one key block of the backward: adds to the key block's dK, dV
// (fp32, [nk, h]) and to the block's rows of dq.
void backward_block(const Geometry& G, int g, int qb, int j0, int nk, float* dK, float* dV, bf16* dq,
                    const float* delta, const bf16* d_o, const float* lse, const bf16* q, const bf16* K,
                    const bf16* V, const std::int64_t* q_pos, const std::int64_t* q_lo, const std::int64_t* k_pos,
                    bool masked) {
  const int h = G.h, i0 = qb * G.R, nq = std::min(G.R, G.Sq - i0), M = G.group * nq;
  Scratch& s = Scratch::mine();
  bf16* Q = sized(s.Q, std::size_t(M) * h);
  bf16* dO = sized(s.dO, std::size_t(M) * h);
  bf16* P = sized(s.P, std::size_t(M) * kKeys);
  bf16* dS = sized(s.dS, std::size_t(M) * kKeys);
  float* S = sized(s.S, std::size_t(M) * kKeys);
  float* dP = sized(s.dP, std::size_t(M) * kKeys);
  float* dQ = sized(s.O, std::size_t(M) * h);
  pack_rows(Q, q, G, g, i0, nq);
  pack_rows(dO, d_o, G, g, i0, nq);
  gemm_onednn_bf16(false, true, M, nk, h, G.scale, Q, h, K, G.ldk, 0.0f, S, nullptr, kKeys);  // S = scale Q K^T
  for (int rho = 0; rho < M; ++rho) {  // P = exp(S - lse), masked
    const int r = rho % nq, n = g * G.group + rho / nq;
    const float l = lse[std::size_t(i0 + r) * G.Hq + n];
    float* srow = S + std::size_t(rho) * kKeys;
    bf16* prow = P + std::size_t(rho) * kKeys;
    if (l == kNegInf) {  // a row that sees no key at all: no gradient
      std::fill_n(srow, nk, 0.0f);
      std::fill_n(prow, nk, bf16(0.0f));
      continue;
    }
    const std::int64_t qp = q_pos[i0 + r], lo = first_visible(q_lo, i0 + r);
#pragma omp simd
    for (int t = 0; t < nk; ++t) {
      const float p = masked && (k_pos[t] > qp || k_pos[t] < lo) ? 0.0f : tile::exp(srow[t] - l);
      srow[t] = p;
      prow[t] = bf16(p);
    }
  }
  gemm_onednn_bf16(true, false, nk, h, M, 1.0f, P, kKeys, dO, h, 1.0f, dV, nullptr, h);   // dV += P^T dO
  gemm_onednn_bf16(false, true, M, nk, h, 1.0f, dO, h, V, G.ldk, 0.0f, dP, nullptr, kKeys);  // dP = dO V^T
  for (int rho = 0; rho < M; ++rho) {  // dS = P (dP - D)
    const int r = rho % nq, n = g * G.group + rho / nq;
    const float D = delta[std::size_t(i0 + r) * G.Hq + n];
    const float* prow = S + std::size_t(rho) * kKeys;
    const float* dprow = dP + std::size_t(rho) * kKeys;
    bf16* dsrow = dS + std::size_t(rho) * kKeys;
#pragma omp simd
    for (int t = 0; t < nk; ++t) dsrow[t] = bf16(prow[t] * (dprow[t] - D));
  }
  gemm_onednn_bf16(true, false, nk, h, M, G.scale, dS, kKeys, Q, h, 1.0f, dK, nullptr, h);    // dK += scale dS^T Q
  gemm_onednn_bf16(false, false, M, h, nk, G.scale, dS, kKeys, K, G.ldk, 0.0f, dQ, nullptr, h);  // dQ = scale dS K
  for (int rho = 0; rho < M; ++rho) {
    const int e = rho / nq, r = rho % nq;
    bf16* out = dq + std::size_t(i0 + r) * G.ldq + std::size_t(g * G.group + e) * h;
    for (int c = 0; c < h; ++c) out[c] = bf16(float(out[c]) + dQ[std::size_t(rho) * h + c]);
  }
}

// One kv head of the backward: every key block, and within it every query block that sees it.
void backward_head(const Geometry& G, int g, bf16* dq, bf16* dk, bf16* dv, const float* delta, const bf16* d_o,
                   const float* lse, const bf16* q, const bf16* k, const bf16* v, const std::int64_t* q_pos,
                   const std::int64_t* q_lo, const std::int64_t* k_pos) {
  const int h = G.h;
  std::vector<float> dK(std::size_t(kKeys) * h), dV(std::size_t(kKeys) * h);
  for (int kb = 0; kb < G.n_kb; ++kb) {
    const int j0 = kb * kKeys, nk = std::min(kKeys, G.Sk - j0);
    const auto [k_lo, k_hi] = range_of(k_pos, j0, nk);
    std::fill(dK.begin(), dK.end(), 0.0f);
    std::fill(dV.begin(), dV.end(), 0.0f);
    const bf16* K = k + std::size_t(j0) * G.ldk + std::size_t(g) * h;
    const bf16* V = v + std::size_t(j0) * G.ldk + std::size_t(g) * h;
    for (int qb = 0; qb < G.n_qb; ++qb) {
      const int i0 = qb * G.R, nq = std::min(G.R, G.Sq - i0);
      const auto [q_min, q_max] = range_of(q_pos, i0, nq);
      const auto [lo_min, lo_max] = lo_range_of(q_lo, i0, nq);
      if (nothing_visible(k_lo, k_hi, q_max, lo_min)) continue;
      backward_block(G, g, qb, j0, nk, dK.data(), dV.data(), dq, delta, d_o, lse, q, K, V, q_pos, q_lo, k_pos + j0,
                     !all_visible(k_lo, k_hi, q_min, lo_max));
    }
    for (int t = 0; t < nk; ++t) {
      bf16* dkr = dk + std::size_t(j0 + t) * G.ldk + std::size_t(g) * h;
      bf16* dvr = dv + std::size_t(j0 + t) * G.ldk + std::size_t(g) * h;
      for (int c = 0; c < h; ++c) {
        dkr[c] = bf16(float(dkr[c]) + dK[std::size_t(t) * h + c]);
        dvr[c] = bf16(float(dvr[c]) + dV[std::size_t(t) * h + c]);
      }
    }
  }
}

}  // namespace

bool attention_onednn_available() { return onednn_bf16_available(); }

void attention_forward_onednn(const Mat<bf16>& o, const Mat<float>& lse, const Mat<const bf16>& q,
                              const Mat<const bf16>& k, const Mat<const bf16>& v, const Vec<const std::int64_t>& q_pos,
                              const Vec<const std::int64_t>& q_lo, const Vec<const std::int64_t>& k_pos, int head_dim) {
  const Geometry G(int(q.extent(0)), int(k.extent(0)), int(q.extent(1)) / head_dim, int(k.extent(1)) / head_dim,
                   head_dim);
  if (G.Sq == 0) return;
  if (G.Sk == 0) {  // no key: o = 0, lse = -inf
    Kokkos::deep_copy(o, bf16(0.0f));
    Kokkos::deep_copy(lse, kNegInf);
    return;
  }
  const std::int64_t* lo = q_lo.extent(0) > 0 ? q_lo.data() : nullptr;
  Kokkos::fence();
  // dynamic: a block's work grows with its position (causal), so threads take blocks as they finish
  Kokkos::parallel_for("attention_forward_onednn",
                       Kokkos::RangePolicy<Host, Kokkos::Schedule<Kokkos::Dynamic>>(0, G.Gk * G.n_qb), [&](const int task) {
    forward_block(G, task % G.Gk, task / G.Gk, o.data(), lse.data(), q.data(), k.data(), v.data(), q_pos.data(),
                  lo, k_pos.data());
  });
  Kokkos::fence();
}

void attention_backward_onednn(const Mat<bf16>& dq, const Mat<bf16>& dk, const Mat<bf16>& dv, const Mat<float>& delta,
                               const Mat<const bf16>& d_o, const Mat<const bf16>& o, const Mat<const float>& lse,
                               const Mat<const bf16>& q, const Mat<const bf16>& k, const Mat<const bf16>& v,
                               const Vec<const std::int64_t>& q_pos, const Vec<const std::int64_t>& q_lo,
                               const Vec<const std::int64_t>& k_pos, int head_dim) {
  const Geometry G(int(q.extent(0)), int(k.extent(0)), int(q.extent(1)) / head_dim, int(k.extent(1)) / head_dim,
                   head_dim);
  if (G.Sq == 0 || G.Sk == 0) return;
  const std::int64_t* lo = q_lo.extent(0) > 0 ? q_lo.data() : nullptr;
  Kokkos::fence();
  Kokkos::parallel_for("attention_backward_delta_onednn", Kokkos::RangePolicy<Host>(0, G.Sq), [&](const int i) {
    for (int n = 0; n < G.Hq; ++n) {  // D_i = rowsum(dO_i * O_i), per head
      float s = 0;
      const bf16* a = d_o.data() + std::size_t(i) * G.ldq + std::size_t(n) * G.h;
      const bf16* b = o.data() + std::size_t(i) * G.ldq + std::size_t(n) * G.h;
      for (int c = 0; c < G.h; ++c) s += float(a[c]) * float(b[c]);
      delta(i, n) = s;
    }
  });
  Kokkos::parallel_for("attention_backward_onednn", Kokkos::RangePolicy<Host>(0, G.Gk), [&](const int g) {
    backward_head(G, g, dq.data(), dk.data(), dv.data(), delta.data(), d_o.data(), lse.data(), q.data(), k.data(),
                  v.data(), q_pos.data(), lo, k_pos.data());
  });
  Kokkos::fence();
}

#else  // no oneDNN: never selected (core/kernel_choice.cpp refuses it)

bool attention_onednn_available() { return false; }
void attention_forward_onednn(const Mat<bf16>&, const Mat<float>&, const Mat<const bf16>&, const Mat<const bf16>&,
                              const Mat<const bf16>&, const Vec<const std::int64_t>&, const Vec<const std::int64_t>&,
                              const Vec<const std::int64_t>&, int) {
  throw std::logic_error("attention_forward_onednn: this build has no oneDNN");
}
void attention_backward_onednn(const Mat<bf16>&, const Mat<bf16>&, const Mat<bf16>&, const Mat<float>&,
                               const Mat<const bf16>&, const Mat<const bf16>&, const Mat<const float>&,
                               const Mat<const bf16>&, const Mat<const bf16>&, const Mat<const bf16>&,
                               const Vec<const std::int64_t>&, const Vec<const std::int64_t>&,
                               const Vec<const std::int64_t>&, int) {
  throw std::logic_error("attention_backward_onednn: this build has no oneDNN");
}

#endif

}  // namespace minilst::kernels
