// attention (kernels/attention.hpp and its companions): grouped-query causal attention on
// global positions, in flash tiles; attention_reference.hpp its plain twin, attention_merge.hpp
// the merge of ring key blocks, attention_tensor_core.hpp the CUDA tensor-core kernels. In
// double unless stated. (The RSA phases of attention_rsa.hpp are checked on 1-4 ranks in
// test_parallel; which kernel a run chooses in test_kernel_choice.cpp.)
//  * The optimised forward against a naive attention written here (an explicit [Sq, Sk] score
//    matrix per head, masked softmax) to 1e-12, also beyond the kernel's tiles; its backward
//    against finite differences and against the naive backward; GQA, MHA, MQA; rows with no
//    visible key (o = 0, lse = -inf, zero gradients); ring key blocks merge to full attention;
//    the backward accumulates (+=).
//  * The reference twin against the optimised kernels, double (~1e-12) and float (the rounding
//    of two summation orders): forward (o, lse) and backward (dq, dk, dv, the delta workspace)
//    on odd sizes, Sq != Sk, GQA (Hq=4, Gk=2), MHA, MQA (Gk=1), head dims 8, 12 and 64, 150
//    tokens (more than the optimised kernel's 64-row and 64-key tiles), shuffled and zigzag
//    positions, and ring blocks whose keys all follow some (or all) of the queries. Both
//    backwards are given the same o and lse, so each comparison isolates one kernel. The
//    reference's rows with no visible key, its += contract, its gradient against finite
//    differences, and attention_merge of its ring key blocks.
//  * The float instantiation against double (odd head dim; h = 16 over several tiles).
//  * CUDA builds only: the tensor-core kernels (bf16 and tf32) against the float64 naive
//    attention on the same rounded inputs.
// Errors: norm-wise relative ||a - b|| / ||b|| unless stated; lse as max abs difference (equal
// infinities count as 0). Each check prints its observed error as "[err] <what> = <value>".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/batch.hpp"
#include "core/kernel_choice.hpp"
#include "kernel_test_util.hpp"
#include "kernels/attention.hpp"
#include "kernels/attention_merge.hpp"
#include "kernels/attention_reference.hpp"
#include "kernels/select.hpp"
#include "kernels/types.hpp"

using namespace minilst::kernel_test;
namespace K = minilst::kernels;

namespace {
// Naive attention reference: explicit [Sq, Sk] score matrix per head, masked softmax.

struct AttnShape {
  int Sq, Sk, Hq, Gk, h;
  std::vector<std::int64_t> qpos, kpos;
  minilst::SequenceMask mask;  // documents and window (default: causal)
};

// Whether the query at position qp sees the key at kp under s's mask, decided here
// without q_lo: the key is not after the query, in the query's document (documents
// start at 0 and at each of mask.doc_starts), and within the window's w latest positions.
bool sees(const AttnShape& s, std::int64_t qp, std::int64_t kp) {
  const auto document = [&](std::int64_t p) {
    return std::count_if(s.mask.doc_starts.begin(), s.mask.doc_starts.end(), [p](std::int64_t d) { return d <= p; });
  };
  return kp <= qp && document(kp) == document(qp) && (s.mask.window == 0 || qp - kp < s.mask.window);
}

// The kernels' first visible positions of s's queries (empty when causal, as a run passes them).
std::vector<std::int64_t> q_lo_of(const AttnShape& s) {
  return s.mask.causal_only() ? std::vector<std::int64_t>{} : s.mask.q_lo(s.qpos);
}

struct AttnRef {
  Host o, lse;  // [Sq, Hq*h], [Sq, Hq]
};

AttnRef naive_attention_forward(const AttnShape& s, const Host& q, const Host& k, const Host& v) {
  const int group = s.Hq / s.Gk, Dq = s.Hq * s.h, Dk = s.Gk * s.h;
  const double scale = 1.0 / std::sqrt(double(s.h));
  AttnRef r{Host(std::size_t(s.Sq) * Dq, 0.0), Host(std::size_t(s.Sq) * s.Hq, kNegInf)};
  for (int n = 0; n < s.Hq; ++n) {
    const int qo = n * s.h, ko = (n / group) * s.h;
    for (int i = 0; i < s.Sq; ++i) {
      std::vector<double> score(s.Sk, kNegInf);
      double mx = kNegInf;
      for (int j = 0; j < s.Sk; ++j) {
        if (!sees(s, s.qpos[i], s.kpos[j])) continue;
        double d = 0;
        for (int c = 0; c < s.h; ++c) d += q[i * Dq + qo + c] * k[j * Dk + ko + c];
        score[j] = scale * d;
        mx = std::max(mx, score[j]);
      }
      if (mx == kNegInf) continue;  // no visible key: o = 0, lse = -inf
      double l = 0;
      for (int j = 0; j < s.Sk; ++j)
        if (score[j] != kNegInf) l += std::exp(score[j] - mx);
      for (int j = 0; j < s.Sk; ++j) {
        if (score[j] == kNegInf) continue;
        const double p = std::exp(score[j] - mx) / l;
        for (int c = 0; c < s.h; ++c) r.o[i * Dq + qo + c] += p * v[j * Dk + ko + c];
      }
      r.lse[i * s.Hq + n] = mx + std::log(l);
    }
  }
  return r;
}

// Naive backward from the explicit probability matrix P and dP = dO V^T (D_i = sum_j P_ij dP_ij).
void naive_attention_backward(const AttnShape& s, const Host& q, const Host& k, const Host& v,
                              const Host& dO, Host& dq, Host& dk, Host& dv) {
  const int group = s.Hq / s.Gk, Dq = s.Hq * s.h, Dk = s.Gk * s.h;
  const double scale = 1.0 / std::sqrt(double(s.h));
  const AttnRef f = naive_attention_forward(s, q, k, v);
  dq.assign(std::size_t(s.Sq) * Dq, 0.0);
  dk.assign(std::size_t(s.Sk) * Dk, 0.0);
  dv.assign(std::size_t(s.Sk) * Dk, 0.0);
  for (int n = 0; n < s.Hq; ++n) {
    const int qo = n * s.h, ko = (n / group) * s.h;
    for (int i = 0; i < s.Sq; ++i) {
      const double lse = f.lse[i * s.Hq + n];
      if (lse == kNegInf) continue;
      std::vector<double> P(s.Sk, 0.0), dP(s.Sk, 0.0);
      double D = 0;
      for (int j = 0; j < s.Sk; ++j) {
        if (!sees(s, s.qpos[i], s.kpos[j])) continue;
        double d = 0, e = 0;
        for (int c = 0; c < s.h; ++c) {
          d += q[i * Dq + qo + c] * k[j * Dk + ko + c];
          e += dO[i * Dq + qo + c] * v[j * Dk + ko + c];
        }
        P[j] = std::exp(scale * d - lse);
        dP[j] = e;
        D += P[j] * dP[j];
      }
      for (int j = 0; j < s.Sk; ++j) {
        if (P[j] == 0.0) continue;
        const double dS = P[j] * (dP[j] - D);
        for (int c = 0; c < s.h; ++c) {
          dq[i * Dq + qo + c] += scale * dS * k[j * Dk + ko + c];
          dk[j * Dk + ko + c] += scale * dS * q[i * Dq + qo + c];
          dv[j * Dk + ko + c] += P[j] * dO[i * Dq + qo + c];
        }
      }
    }
  }
}

// Device-side inputs of one attention problem, filled at random.
template <class T = double>
struct AttnProblem {
  AttnShape s;
  Mat<T> q, k, v;
  Vec<std::int64_t> qp, kp, ql;
  AttnProblem(const AttnShape& shape, Rng& rng)
      : s(shape),
        q("q", shape.Sq, shape.Hq * shape.h),
        k("k", shape.Sk, shape.Gk * shape.h),
        v("v", shape.Sk, shape.Gk * shape.h),
        qp(ids(shape.qpos)),
        kp(ids(shape.kpos)),
        ql(ids(q_lo_of(shape))) {
    fill_random(q, rng, -1.5, 1.5);  // wide enough for peaked softmax rows
    fill_random(k, rng, -1.5, 1.5);
    fill_random(v, rng);
  }
  std::pair<Mat<T>, Mat<T>> forward() const {
    Mat<T> o("o", s.Sq, s.Hq * s.h), lse("lse", s.Sq, s.Hq);
    K::attention_forward<T>(o, lse, q, k, v, qp, ql, kp, s.h);
    return {o, lse};
  }
};

// A GQA problem with arbitrary positions: queries a zigzag subset, keys shuffled, Sq != Sk.
// Queries at positions 0 and 1 see no key (the smallest key position is 2).
AttnShape gqa_shape(int Hq = 4, int Gk = 2) {
  return AttnShape{11, 13, Hq, Gk, 6,
                   {20, 1, 15, 3, 9, 0, 22, 6, 12, 18, 4},
                   {13, 2, 21, 8, 4, 17, 10, 5, 19, 7, 14, 11, 16}};
}

// Runs attention backward with dO and returns (dq, dk, dv), starting from zero.
template <class T>
std::vector<Host> attention_grads(const AttnProblem<T>& P, const Mat<T>& dO) {
  auto [o, lse] = P.forward();
  Mat<T> dq("dq", P.q.extent(0), P.q.extent(1)), dk("dk", P.k.extent(0), P.k.extent(1)),
      dv("dv", P.v.extent(0), P.v.extent(1));
  Mat<minilst::accum_t<T>> delta("delta", P.s.Sq, P.s.Hq);
  K::attention_backward<T>(dq, dk, dv, delta, dO, o, lse, P.q, P.k, P.v, P.qp, P.ql, P.kp, P.s.h);
  return {to_host(dq), to_host(dk), to_host(dv)};
}

void check_attention_fd(const AttnShape& shape, std::uint64_t seed, const std::string& tag) {
  Rng rng(seed);
  AttnProblem<double> P(shape, rng);
  Mat<double> R("R", shape.Sq, shape.Hq * shape.h);
  fill_random(R, rng);
  const Host Rh = to_host(R);
  const auto g = attention_grads(P, R);
  auto loss = [&] { return dot(to_host(P.forward().first), Rh); };
  expect_grad_close(tag + " dq", g[0], fd_grad(P.q, loss));
  expect_grad_close(tag + " dk", g[1], fd_grad(P.k, loss));
  expect_grad_close(tag + " dv", g[2], fd_grad(P.v, loss));
}

void check_attention_vs_naive(const AttnShape& shape, std::uint64_t seed, const std::string& tag) {
  Rng rng(seed);
  AttnProblem<double> P(shape, rng);
  auto [o, lse] = P.forward();
  const auto ref = naive_attention_forward(shape, to_host(P.q), to_host(P.k), to_host(P.v));
  const double eo = max_abs_diff(to_host(o), ref.o), el = max_abs_diff(to_host(lse), ref.lse);
  note(tag + " o vs naive (max abs)", eo);
  note(tag + " lse vs naive (max abs)", el);
  EXPECT_LE(eo, 1e-12) << tag;
  EXPECT_LE(el, 1e-12) << tag;
}
}  // namespace

// =============================================================================================
// The optimised kernels against the naive attention and finite differences.

TEST(Attention, ForwardMatchesNaiveGqaWithPositions) {
  check_attention_vs_naive(gqa_shape(), 20, "gqa Hq=4 Gk=2");
}

TEST(Attention, RowWithNoVisibleKeyHasZeroOutputMinusInfLseAndZeroGradients) {
  Rng rng(21);
  const AttnShape s = gqa_shape();
  AttnProblem<double> P(s, rng);
  auto [o, lse] = P.forward();
  Mat<double> R("R", s.Sq, s.Hq * s.h);
  fill_random(R, rng);
  const auto g = attention_grads(P, R);
  const Host oh = to_host(o), lh = to_host(lse);
  const int Dq = s.Hq * s.h;
  int blind_rows = 0;
  for (int i = 0; i < s.Sq; ++i) {
    if (s.qpos[i] >= 2) continue;  // rows at positions 0 and 1 precede every key
    ++blind_rows;
    for (int n = 0; n < s.Hq; ++n) EXPECT_EQ(lh[i * s.Hq + n], kNegInf) << "row " << i;
    for (int c = 0; c < Dq; ++c) {
      EXPECT_EQ(oh[i * Dq + c], 0.0) << "row " << i;
      EXPECT_EQ(g[0][i * Dq + c], 0.0) << "dq row " << i;
    }
  }
  EXPECT_EQ(blind_rows, 2);
  for (double e : oh) EXPECT_TRUE(std::isfinite(e));
  for (const Host& gi : g)
    for (double e : gi) EXPECT_TRUE(std::isfinite(e));
}

TEST(Attention, BackwardMatchesFiniteDifferencesGqaWithPositions) {
  check_attention_fd(gqa_shape(4, 2), 22, "attention gqa Hq=4 Gk=2");
}

TEST(Attention, MhaMatchesNaiveAndFiniteDifferences) {
  check_attention_vs_naive(gqa_shape(3, 3), 23, "mha Hq=Gk=3");
  check_attention_fd(gqa_shape(3, 3), 24, "attention mha Hq=Gk=3");
}

TEST(Attention, MqaMatchesNaiveAndFiniteDifferences) {
  check_attention_vs_naive(gqa_shape(4, 1), 25, "mqa Hq=4 Gk=1");
  check_attention_fd(gqa_shape(4, 1), 26, "attention mqa Hq=4 Gk=1");
}

TEST(Attention, BackwardMatchesNaiveBackwardOnSmallProblem) {
  // Ties the naive backward (used below at sizes too large for FD) to the kernel where FD passed.
  Rng rng(27);
  const AttnShape s = gqa_shape();
  AttnProblem<double> P(s, rng);
  Mat<double> R("R", s.Sq, s.Hq * s.h);
  fill_random(R, rng);
  const auto g = attention_grads(P, R);
  Host dq, dk, dv;
  naive_attention_backward(s, to_host(P.q), to_host(P.k), to_host(P.v), to_host(R), dq, dk, dv);
  const double e = std::max({rel_err(g[0], dq), rel_err(g[1], dk), rel_err(g[2], dv)});
  note("attention small backward vs naive backward (rel)", e);
  EXPECT_LE(e, 1e-12);
}

TEST(Attention, LargerThanTilesMatchesNaiveForwardAndBackward) {
  // 150 query rows and keys: 5 tiles of 32 rows, 3 tiles of 64 keys (the last partial).
  Rng rng(28);
  std::vector<AttnShape> shapes = {
      {150, 150, 4, 2, 8, iota_pos(150), iota_pos(150)},  // causal: whole key tiles masked
      {150, 150, 2, 1, 8, shuffled(iota_pos(150), rng), shuffled(iota_pos(150), rng)},
      {70, 150, 2, 2, 8, shuffled(iota_pos(70, 80), rng), shuffled(iota_pos(150), rng)},  // Sq != Sk
  };
  int idx = 0;
  for (const auto& s : shapes) {
    const std::string tag = "tiled#" + std::to_string(idx++) + " Sq=" + std::to_string(s.Sq) +
                            " Sk=" + std::to_string(s.Sk);
    check_attention_vs_naive(s, 100 + idx, tag);
    AttnProblem<double> P(s, rng);
    Mat<double> R("R", s.Sq, s.Hq * s.h);
    fill_random(R, rng);
    const auto g = attention_grads(P, R);
    Host dq, dk, dv;
    naive_attention_backward(s, to_host(P.q), to_host(P.k), to_host(P.v), to_host(R), dq, dk, dv);
    const double e = std::max({rel_err(g[0], dq), rel_err(g[1], dk), rel_err(g[2], dv)});
    note(tag + " backward vs naive backward (rel)", e);
    EXPECT_LE(e, 1e-12) << tag;
    // And one directional FD: d/dt L(q + t Dq, k + t Dk, v + t Dv) against <g, D>.
    const Host q0 = to_host(P.q), k0 = to_host(P.k), v0 = to_host(P.v), Rh = to_host(R);
    const Host Dq = random_vec(q0.size(), rng), Dk = random_vec(k0.size(), rng),
               Dv = random_vec(v0.size(), rng);
    auto loss_at = [&](double t) {
      auto move = [t](Host x, const Host& D) {
        for (std::size_t n = 0; n < x.size(); ++n) x[n] += t * D[n];
        return x;
      };
      from_host(P.q, move(q0, Dq));
      from_host(P.k, move(k0, Dk));
      from_host(P.v, move(v0, Dv));
      return dot(to_host(P.forward().first), Rh);
    };
    const double t = 1e-5, fd = (loss_at(t) - loss_at(-t)) / (2 * t);
    const double an = dot(g[0], Dq) + dot(g[1], Dk) + dot(g[2], Dv);
    const double ed = std::fabs(an - fd) / std::fabs(fd);
    note(tag + " directional derivative vs FD (rel)", ed);
    EXPECT_LE(ed, kFdTol) << tag;
  }
}

TEST(Attention, RingOverTwoKeyBlocksMatchesFullAttention) {
  // Keys split into B1 = rows 0..5 and B2 = rows 6..12 (positions interleaved). Queries at
  // positions 3 and 4 see keys only in B1 (B2's smallest position is 5): lse2 = -inf there.
  Rng rng(29);
  const AttnShape s = gqa_shape();
  AttnProblem<double> P(s, rng);
  const int Dq = s.Hq * s.h, split = 6;
  auto [o, lse] = P.forward();
  auto block = [&](auto view, int b) {
    return b == 0 ? minilst::rows(view, 0, split) : minilst::rows(view, split, s.Sk);
  };
  auto kp_block = [&](int b) {
    return Kokkos::subview(P.kp, b == 0 ? std::make_pair(0, split) : std::make_pair(split, s.Sk));
  };
  Mat<double> ob[2] = {Mat<double>("o1", s.Sq, Dq), Mat<double>("o2", s.Sq, Dq)};
  Mat<double> lb[2] = {Mat<double>("lse1", s.Sq, s.Hq), Mat<double>("lse2", s.Sq, s.Hq)};
  for (int b = 0; b < 2; ++b)
    K::attention_forward<double>(ob[b], lb[b], P.q, block(P.k, b), block(P.v, b), P.qp, P.ql, kp_block(b), s.h);
  const Host o1 = to_host(ob[0]), o2 = to_host(ob[1]), l1 = to_host(lb[0]), l2 = to_host(lb[1]);
  Host om(o1.size(), 0.0), lm(l1.size(), kNegInf);
  int b2_blind = 0;
  for (int i = 0; i < s.Sq; ++i)
    for (int n = 0; n < s.Hq; ++n) {
      const double a = l1[i * s.Hq + n], c = l2[i * s.Hq + n];
      b2_blind += (a != kNegInf && c == kNegInf);
      const double mx = std::max(a, c);
      if (mx == kNegInf) continue;
      const double L = mx + std::log(std::exp(a - mx) + std::exp(c - mx));
      lm[i * s.Hq + n] = L;
      for (int cc = 0; cc < s.h; ++cc) {
        const std::size_t e = std::size_t(i) * Dq + n * s.h + cc;
        om[e] = std::exp(a - L) * o1[e] + std::exp(c - L) * o2[e];
      }
    }
  EXPECT_GT(b2_blind, 0) << "the split should leave some rows with an all-masked block";
  const double eo = max_abs_diff(om, to_host(o)), el = max_abs_diff(lm, to_host(lse));
  note("ring merged o vs full (max abs)", eo);
  note("ring merged lse vs full (max abs)", el);
  EXPECT_LE(eo, 1e-12);
  EXPECT_LE(el, 1e-12);

  // Backward per block with the global o / lse: dq accumulates over blocks, dk / dv are the
  // block's rows of the full backward.
  Mat<double> R("R", s.Sq, Dq);
  fill_random(R, rng);
  const auto full = attention_grads(P, R);
  Mat<double> dq("dq", s.Sq, Dq), dk("dk", s.Sk, s.Gk * s.h), dv("dv", s.Sk, s.Gk * s.h);
  Mat<double> delta("delta", s.Sq, s.Hq);
  for (int b = 0; b < 2; ++b)
    K::attention_backward<double>(dq, block(dk, b), block(dv, b), delta, R, o, lse, P.q,
                                  block(P.k, b), block(P.v, b), P.qp, P.ql, kp_block(b), s.h);
  const double e = std::max({max_abs_diff(to_host(dq), full[0]), max_abs_diff(to_host(dk), full[1]),
                             max_abs_diff(to_host(dv), full[2])});
  note("ring blockwise backward vs full (max abs)", e);
  EXPECT_LE(e, 1e-12);
}

TEST(Attention, BackwardAccumulatesIntoDqDkDv) {
  Rng rng(30);
  const AttnShape s = gqa_shape();
  AttnProblem<double> P(s, rng);
  Mat<double> R("R", s.Sq, s.Hq * s.h);
  fill_random(R, rng);
  const auto g = attention_grads(P, R);
  auto [o, lse] = P.forward();
  Mat<double> dq("dq", s.Sq, s.Hq * s.h), dk("dk", s.Sk, s.Gk * s.h), dv("dv", s.Sk, s.Gk * s.h);
  Mat<double> delta("delta", s.Sq, s.Hq);
  fill_random(dq, rng);
  fill_random(dk, rng);
  fill_random(dv, rng);
  fill_random(delta, rng);  // a workspace: its initial content must not matter
  const Host init[3] = {to_host(dq), to_host(dk), to_host(dv)};
  K::attention_backward<double>(dq, dk, dv, delta, R, o, lse, P.q, P.k, P.v, P.qp, P.ql, P.kp, s.h);
  const Host got[3] = {to_host(dq), to_host(dk), to_host(dv)};
  for (int t = 0; t < 3; ++t) {
    Host expect = init[t];
    for (std::size_t n = 0; n < expect.size(); ++n) expect[n] += g[t][n];
    EXPECT_LE(max_abs_diff(got[t], expect), 1e-14) << "gradient " << t;
  }
}

// =============================================================================================
// The reference twin (kernels/attention_reference.hpp) against the optimised kernels; the merge
// of ring key blocks (kernels/attention_merge.hpp).

namespace {
namespace twin {
// Attention problems: the same double inputs for the double and the float runs.

struct AttnShape {
  std::string name;
  int Sq, Sk, Hq, Gk, h;
  std::vector<std::int64_t> qpos, kpos;
  minilst::SequenceMask mask;  // documents and window (default: causal)
};

// Host inputs of one problem: q, k, v and the output cotangent dO.
struct AttnData {
  AttnShape s;
  Host q, k, v, dO;
  AttnData(AttnShape shape, std::uint64_t seed) : s(std::move(shape)) {
    Rng rng(seed);
    q = random_vec(std::size_t(s.Sq) * s.Hq * s.h, rng, -1.5, 1.5);  // wide enough for peaked rows
    k = random_vec(std::size_t(s.Sk) * s.Gk * s.h, rng, -1.5, 1.5);
    v = random_vec(std::size_t(s.Sk) * s.Gk * s.h, rng);
    dO = random_vec(std::size_t(s.Sq) * s.Hq * s.h, rng);
  }
};

// Device-side inputs of one attention problem in storage type T.
template <class T>
struct AttnProblem {
  using A = minilst::accum_t<T>;
  AttnShape s;
  Mat<T> q, k, v, dO;  // [Sq, Hq*h], [Sk, Gk*h] x2, [Sq, Hq*h]
  Vec<std::int64_t> qp, kp, ql;  // ql: the queries' first visible positions (empty: causal)
  explicit AttnProblem(const AttnData& d)
      : s(d.s),
        q(mat_of<T>("q", s.Sq, std::size_t(s.Hq) * s.h, d.q)),
        k(mat_of<T>("k", s.Sk, std::size_t(s.Gk) * s.h, d.k)),
        v(mat_of<T>("v", s.Sk, std::size_t(s.Gk) * s.h, d.v)),
        dO(mat_of<T>("dO", s.Sq, std::size_t(s.Hq) * s.h, d.dO)),
        qp(ids(s.qpos)),
        kp(ids(s.kpos)),
        ql(ids(s.mask.causal_only() ? std::vector<std::int64_t>{} : s.mask.q_lo(s.qpos))) {}
  // (o, lse) of the reference or the optimised forward.
  std::pair<Mat<T>, Mat<A>> forward(bool reference) const {
    Mat<T> o("o", s.Sq, std::size_t(s.Hq) * s.h);
    Mat<A> lse("lse", s.Sq, s.Hq);
    Kokkos::deep_copy(o, T(3));  // forward overwrites (=): stale content must not matter
    Kokkos::deep_copy(lse, A(3));
    if (reference)
      K::attention_forward_reference<T>(o, lse, q, k, v, qp, ql, kp, s.h);
    else
      K::attention_forward<T>(o, lse, q, k, v, qp, ql, kp, s.h);
    return {o, lse};
  }
};

// dq, dk, dv (from zero) and delta of one backward given o and lse.
struct AttnGrads {
  Host dq, dk, dv, delta;
};

template <class T>
AttnGrads attention_grads(const AttnProblem<T>& P, const Mat<T>& o, const Mat<minilst::accum_t<T>>& lse,
                          bool reference) {
  const AttnShape& s = P.s;
  Mat<T> dq("dq", s.Sq, std::size_t(s.Hq) * s.h), dk("dk", s.Sk, std::size_t(s.Gk) * s.h),
      dv("dv", s.Sk, std::size_t(s.Gk) * s.h);
  Mat<minilst::accum_t<T>> delta("delta", s.Sq, s.Hq);
  Kokkos::deep_copy(delta, minilst::accum_t<T>(7));  // a workspace: its content must not matter
  if (reference)
    K::attention_backward_reference<T>(dq, dk, dv, delta, P.dO, o, lse, P.q, P.k, P.v, P.qp, P.ql, P.kp, s.h);
  else
    K::attention_backward<T>(dq, dk, dv, delta, P.dO, o, lse, P.q, P.k, P.v, P.qp, P.ql, P.kp, s.h);
  return {to_host(dq), to_host(dk), to_host(dv), to_host(delta)};
}

// The shapes every reference-versus-optimised comparison runs on.
std::vector<AttnShape> attention_shapes() {
  Rng rng(7);
  // Zigzag: a sequence of 300 in 4 chunks of 75, this rank holding chunks 0 and 3.
  const auto zigzag = concat(iota_pos(75, 0), iota_pos(75, 225));
  const auto middle = iota_pos(150, 75);  // chunks 1 and 2: the other rank's block
  return {
      // Odd sizes, Sq != Sk, arbitrary positions; queries at 0 and 1 see no key (smallest key is 2).
      {"gqa Hq=4 Gk=2 h=12 11x13 zigzag", 11, 13, 4, 2, 12,
       {20, 1, 15, 3, 9, 0, 22, 6, 12, 18, 4}, {13, 2, 21, 8, 4, 17, 10, 5, 19, 7, 14, 11, 16}},
      {"mha Hq=Gk=3 h=8 13x11 shuffled", 13, 11, 3, 3, 8, shuffled(iota_pos(13, 3), rng),
       shuffled(iota_pos(11), rng)},
      {"mqa Hq=4 Gk=1 h=12 17x9 shuffled", 17, 9, 4, 1, 12, shuffled(iota_pos(17), rng),
       shuffled(iota_pos(9, 4), rng)},
      // Beyond the tiles: 150 rows and keys, causal (whole key tiles skipped), shuffled, Sq != Sk.
      {"gqa Hq=4 Gk=2 h=8 150x150 causal", 150, 150, 4, 2, 8, iota_pos(150), iota_pos(150)},
      {"mqa Hq=4 Gk=1 h=64 150x150 shuffled", 150, 150, 4, 1, 64, shuffled(iota_pos(150), rng),
       shuffled(iota_pos(150), rng)},
      {"mha Hq=Gk=2 h=64 70x150 shuffled", 70, 150, 2, 2, 64, shuffled(iota_pos(70, 80), rng),
       shuffled(iota_pos(150), rng)},
      {"gqa Hq=4 Gk=2 h=12 150x150 zigzag", 150, 150, 4, 2, 12, zigzag, zigzag},
      // A ring step: the zigzag rank's queries against the other rank's keys (positions 75..224):
      // the 75 queries of chunk 0 precede every key (fully masked rows), chunk 3 sees them all.
      {"gqa Hq=4 Gk=2 h=8 150x150 ring block", 150, 150, 4, 2, 8, zigzag, middle},
      // A ring step whose keys all follow all the queries: every row masked.
      {"mqa Hq=2 Gk=1 h=8 40x60 ring block all masked", 40, 60, 2, 1, 8, iota_pos(40), iota_pos(60, 100)},
      // Masks with a lower end (q_lo): documents and windows.
      {"gqa Hq=4 Gk=2 h=12 11x13 documents at 6, 13, window 5", 11, 13, 4, 2, 12,
       {20, 1, 15, 3, 9, 0, 22, 6, 12, 18, 4}, {13, 2, 21, 8, 4, 17, 10, 5, 19, 7, 14, 11, 16}, {{6, 13}, 5}},
      {"gqa Hq=4 Gk=2 h=8 150x150 zigzag, documents 1, 2, 90, window 70", 150, 150, 4, 2, 8, zigzag, zigzag,
       {{1, 2, 90}, 70}},
      {"mqa Hq=4 Gk=1 h=64 150x150 shuffled, window 20", 150, 150, 4, 1, 64, shuffled(iota_pos(150), rng),
       shuffled(iota_pos(150), rng), {{}, 20}},
  };
}

// Reference against optimised on every shape: forward, then both backwards from the same o, lse.
template <class T>
void check_attention_shapes(double tol_o, double tol_lse, double tol_grad) {
  std::uint64_t seed = 100;
  for (const AttnShape& shape : attention_shapes()) {
    const std::string tag = "attention " + type_name<T>() + " " + shape.name;
    const AttnData data(shape, seed++);
    const AttnProblem<T> P(data);
    const auto [o_ref, lse_ref] = P.forward(true);
    const auto [o_opt, lse_opt] = P.forward(false);
    expect_le(tag + ": o ref vs opt (rel)", rel_err(to_host(o_ref), to_host(o_opt)), tol_o);
    expect_le(tag + ": lse ref vs opt (max abs)", max_abs_diff(to_host(lse_ref), to_host(lse_opt)), tol_lse);
    const AttnGrads gr = attention_grads(P, o_opt, lse_opt, true);
    const AttnGrads go = attention_grads(P, o_opt, lse_opt, false);
    const double eg = std::max({rel_err(gr.dq, go.dq), rel_err(gr.dk, go.dk), rel_err(gr.dv, go.dv)});
    expect_le(tag + ": dq/dk/dv ref vs opt (rel, worst)", eg, tol_grad);
    expect_le(tag + ": delta ref vs opt (rel)", rel_err(gr.delta, go.delta), tol_o);
  }
}
}  // namespace twin
}  // namespace

TEST(Attention, ReferenceMatchesOptimisedOnAllShapesDouble) {
  twin::check_attention_shapes<double>(1e-12, 1e-12, 1e-12);
}

TEST(Attention, ReferenceMatchesOptimisedOnAllShapesFloat) {
  twin::check_attention_shapes<float>(2e-6, 5e-6, 5e-6);
}

TEST(Attention, ReferenceRowsWithNoVisibleKeyHaveZeroOutputMinusInfLseAndZeroGradients) {
  // The ring block: queries 0..74 precede every key; the all-masked block: every query does.
  for (const twin::AttnShape& s : twin::attention_shapes()) {
    if (s.name.find("ring block") == std::string::npos) continue;
    const twin::AttnProblem<double> P(twin::AttnData(s, 200));
    const auto [o, lse] = P.forward(true);
    const twin::AttnGrads g = twin::attention_grads(P, o, lse, true);
    const Host oh = to_host(o), lh = to_host(lse);
    const std::int64_t first_key = *std::min_element(s.kpos.begin(), s.kpos.end());
    const int Dq = s.Hq * s.h;
    int blind = 0, seeing = 0;
    for (int i = 0; i < s.Sq; ++i) {
      if (s.qpos[i] >= first_key) {
        ++seeing;
        for (int n = 0; n < s.Hq; ++n) EXPECT_TRUE(std::isfinite(lh[i * s.Hq + n])) << s.name << " row " << i;
        continue;
      }
      ++blind;
      for (int n = 0; n < s.Hq; ++n) EXPECT_EQ(lh[i * s.Hq + n], kNegInf) << s.name << " row " << i;
      for (int c = 0; c < Dq; ++c) {
        EXPECT_EQ(oh[i * Dq + c], 0.0) << s.name << " row " << i;
        EXPECT_EQ(g.dq[i * Dq + c], 0.0) << s.name << " dq row " << i;
      }
    }
    std::printf("  %s: %d fully masked rows, %d rows that see keys\n", s.name.c_str(), blind, seeing);
    EXPECT_GT(blind, 0) << s.name;
    if (seeing == 0) {  // nothing visible at all: dk, dv stay zero too
      EXPECT_EQ(norm(g.dk), 0.0);
      EXPECT_EQ(norm(g.dv), 0.0);
    }
    for (const Host* x : {&oh, &g.dq, &g.dk, &g.dv})
      for (double e : *x) EXPECT_TRUE(std::isfinite(e)) << s.name;
  }
}

TEST(Attention, ReferenceBackwardAccumulatesCalledTwiceGradientsDouble) {
  for (const twin::AttnShape& s : twin::attention_shapes()) {
    if (s.Sq > 20) continue;  // the small odd GQA / MHA / MQA problems
    const twin::AttnProblem<double> P(twin::AttnData(s, 300));
    const auto [o, lse] = P.forward(true);
    Mat<double> dq("dq", s.Sq, std::size_t(s.Hq) * s.h), dk("dk", s.Sk, std::size_t(s.Gk) * s.h),
        dv("dv", s.Sk, std::size_t(s.Gk) * s.h), delta("delta", s.Sq, s.Hq);
    for (int call = 0; call < 2; ++call)
      K::attention_backward_reference<double>(dq, dk, dv, delta, P.dO, o, lse, P.q, P.k, P.v, P.qp, P.ql, P.kp,
                                              s.h);
    const twin::AttnGrads once = twin::attention_grads(P, o, lse, true);
    auto twice = [](Host x) {
      for (auto& e : x) e *= 2;
      return x;
    };
    const double e = std::max({rel_err(to_host(dq), twice(once.dq)), rel_err(to_host(dk), twice(once.dk)),
                               rel_err(to_host(dv), twice(once.dv))});
    expect_le("attention reference " + s.name + ": backward twice vs 2 x once (rel)", e, 1e-14);
    EXPECT_GT(norm(once.dq) * norm(once.dk) * norm(once.dv), 0.0) << "vacuous check";
    // And on top of arbitrary gradients, as the optimised kernel: init + g.
    Rng rng(301);
    const Host init[3] = {random_vec(dq.size(), rng), random_vec(dk.size(), rng), random_vec(dv.size(), rng)};
    Mat<double> out[3] = {dq, dk, dv};
    for (int t = 0; t < 3; ++t) from_host(out[t], init[t]);
    Mat<double> out_opt[3] = {mat_of<double>("dq", dq.extent(0), dq.extent(1), init[0]),
                              mat_of<double>("dk", dk.extent(0), dk.extent(1), init[1]),
                              mat_of<double>("dv", dv.extent(0), dv.extent(1), init[2])};
    K::attention_backward_reference<double>(out[0], out[1], out[2], delta, P.dO, o, lse, P.q, P.k, P.v, P.qp,
                                            P.ql, P.kp, s.h);
    K::attention_backward<double>(out_opt[0], out_opt[1], out_opt[2], delta, P.dO, o, lse, P.q, P.k, P.v,
                                  P.qp, P.ql, P.kp, s.h);
    double ea = 0;
    for (int t = 0; t < 3; ++t) ea = std::max(ea, max_abs_diff(to_host(out[t]), to_host(out_opt[t])));
    expect_le("attention " + s.name + ": init + g, ref vs opt (max abs)", ea, 1e-12);
  }
}

TEST(Attention, ReferenceBackwardMatchesFiniteDifferencesOfReferenceForwardMasked) {
  // Documents and a window: the lower end of the mask (q_lo) too.
  const auto shapes = twin::attention_shapes();
  const auto s = *std::find_if(shapes.begin(), shapes.end(),
                               [](const twin::AttnShape& x) { return x.name.find("11x13 documents") != std::string::npos; });
  const twin::AttnData data(s, 401);
  const twin::AttnProblem<double> P(data);
  const auto [o, lse] = P.forward(true);
  const twin::AttnGrads g = twin::attention_grads(P, o, lse, true);
  auto loss = [&] { return dot(to_host(P.forward(true).first), data.dO); };
  const std::pair<const char*, std::pair<Mat<double>, const Host*>> inputs[] = {
      {"dq", {P.q, &g.dq}}, {"dk", {P.k, &g.dk}}, {"dv", {P.v, &g.dv}}};
  for (const auto& [name, in] : inputs) {
    const Host fd = fd_grad(in.first, loss);
    EXPECT_GT(norm(fd), 0.0) << name;
    expect_le(std::string("attention reference masked ") + name + " vs FD (rel)", rel_err(*in.second, fd), kFdTol);
  }
}

TEST(Attention, ReferenceBackwardMatchesFiniteDifferencesOfReferenceForward) {
  const twin::AttnShape s = twin::attention_shapes()[0];  // GQA, odd sizes, arbitrary positions, blind rows
  const twin::AttnData data(s, 400);
  const twin::AttnProblem<double> P(data);
  const auto [o, lse] = P.forward(true);
  const twin::AttnGrads g = twin::attention_grads(P, o, lse, true);
  auto loss = [&] { return dot(to_host(P.forward(true).first), data.dO); };  // L = sum(o * dO)
  const std::pair<const char*, std::pair<Mat<double>, const Host*>> inputs[] = {
      {"dq", {P.q, &g.dq}}, {"dk", {P.k, &g.dk}}, {"dv", {P.v, &g.dv}}};
  for (const auto& [name, in] : inputs) {
    const Host fd = fd_grad(in.first, loss);
    EXPECT_GT(norm(fd), 0.0) << name << ": the FD gradient is zero, the check would be vacuous";
    expect_le(std::string("attention reference ") + name + " vs FD (rel)", rel_err(*in.second, fd), kFdTol);
  }
}

TEST(Attention, ReferenceRingKeyBlocksMergeToFullAttention) {
  // The zigzag rank's queries against all 300 keys, as two ring blocks of 150 keys: its own
  // (chunks 0 and 3) and the other rank's (chunks 1 and 2, invisible to the queries of chunk 0).
  // Forward: blocks merged by attention_merge = the whole; backward per block with the whole's
  // o and lse: dq adds up over the blocks, dk and dv are the blocks' rows of the whole.
  const auto zigzag = concat(iota_pos(75, 0), iota_pos(75, 225));
  const twin::AttnShape s{"ring", 150, 300, 4, 2, 8, zigzag, concat(zigzag, iota_pos(150, 75))};
  const twin::AttnProblem<double> P(twin::AttnData(s, 500));
  const int Dq = s.Hq * s.h, half = 150;
  auto block = [&](auto view, int b) { return minilst::rows(view, b * half, (b + 1) * half); };
  auto kp_block = [&](int b) { return Kokkos::subview(P.kp, std::make_pair(b * half, (b + 1) * half)); };
  const auto [o, lse] = P.forward(true);
  Mat<double> O("O", s.Sq, Dq), L("L", s.Sq, s.Hq), ob("ob", s.Sq, Dq), lb("lb", s.Sq, s.Hq);
  Kokkos::deep_copy(L, kNegInf);  // the running state before any block
  for (int b = 0; b < 2; ++b) {
    K::attention_forward_reference<double>(ob, lb, P.q, block(P.k, b), block(P.v, b), P.qp, P.ql, kp_block(b), s.h);
    K::attention_merge<double>(O, L, ob, lb, s.h);
  }
  expect_le("attention reference ring-merged o vs whole (max abs)", max_abs_diff(to_host(O), to_host(o)), 1e-12);
  expect_le("attention reference ring-merged lse vs whole (max abs)", max_abs_diff(to_host(L), to_host(lse)), 1e-12);
  const twin::AttnGrads whole = twin::attention_grads(P, o, lse, true);
  Mat<double> dq("dq", s.Sq, Dq), dk("dk", s.Sk, s.Gk * s.h), dv("dv", s.Sk, s.Gk * s.h), delta("delta", s.Sq, s.Hq);
  for (int b = 0; b < 2; ++b)
    K::attention_backward_reference<double>(dq, block(dk, b), block(dv, b), delta, P.dO, o, lse, P.q, block(P.k, b),
                                            block(P.v, b), P.qp, P.ql, kp_block(b), s.h);
  const double e = std::max({rel_err(to_host(dq), whole.dq), rel_err(to_host(dk), whole.dk),
                             rel_err(to_host(dv), whole.dv)});
  expect_le("attention reference ring blockwise backward vs whole (rel)", e, 1e-13);
}

// =============================================================================================
// float

TEST(Attention, FloatAgreesWithDouble) {
  // Forward + backward: small odd head dim (tiles packed and padded), and h = 16 over several
  // tiles with arbitrary positions (K and V rows read in place).
  Rng rng(60);
  for (const AttnShape& s : {gqa_shape(), AttnShape{150, 150, 4, 2, 16, shuffled(iota_pos(150), rng),
                                                    shuffled(iota_pos(150), rng)}}) {
    const std::string tag = "attention h=" + std::to_string(s.h) + " float vs double";
    AttnProblem<double> P(s, rng);
    AttnProblem<float> Pf(s, rng);
    from_host(Pf.q, to_host(P.q));
    from_host(Pf.k, to_host(P.k));
    from_host(Pf.v, to_host(P.v));
    Mat<double> dO("dO", s.Sq, s.Hq * s.h);
    Mat<float> dOf("dOf", s.Sq, s.Hq * s.h);
    fill_random(dO, rng);
    from_host(dOf, to_host(dO));
    auto [o, lse] = P.forward();
    auto [of, lsef] = Pf.forward();
    const double eo = max_abs_diff(to_host(of), to_host(o)), el = max_abs_diff(to_host(lsef), to_host(lse));
    note(tag + " o (max abs)", eo);
    note(tag + " lse (max abs)", el);
    EXPECT_LE(eo, 1e-5);
    EXPECT_LE(el, 1e-5);
    const auto g = attention_grads(P, dO);
    const auto gf = attention_grads(Pf, dOf);
    double ea = 0;
    for (int t = 0; t < 3; ++t) ea = std::max(ea, rel_err(gf[t], g[t]));
    note(tag + " dq/dk/dv (rel)", ea);
    EXPECT_LE(ea, 1e-5);
  }
}

// =============================================================================================
// The tensor-core kernels of CUDA builds against the float64 naive attention (which kernel a
// run chooses: test_kernel_choice.cpp).

namespace {
// The kernel choice that selects an attention kernel, as a run's would.
minilst::KernelChoice attention_by(minilst::AttentionKernel a) {
  minilst::KernelChoice c;
  c.attention = a;
  return c;
}

// One problem through a matrix-unit kernel (the tensor cores of CUDA builds, or oneDNN's
// tiles on hosts; selected by the choice, as a run selects them) against the float64
// reference on the same T-rounded inputs:
// forward o and lse (written over junk), backward dq, dk, dv (norm-wise relative
// errors); the backward twice into fresh zeros is bitwise the same; a second
// backward adds to the first. K and V are row ranges of larger buffers, as a ring's
// key blocks are.
template <class T>
void check_matrix_attention(const minilst::KernelChoice& choice, const AttnShape& s, std::uint64_t seed, double tol,
                            const std::string& tag) {
  Rng rng(seed);
  const int Dq = s.Hq * s.h, Dk = s.Gk * s.h;
  Mat<T> k_all("k_all", s.Sk + 5, Dk), v_all("v_all", s.Sk + 5, Dk);
  const Mat<T> k = minilst::rows(k_all, 3, 3 + s.Sk), v = minilst::rows(v_all, 3, 3 + s.Sk);
  Mat<T> q("q", s.Sq, Dq), dO("dO", s.Sq, Dq);
  from_host(q, random_vec(std::size_t(s.Sq) * Dq, rng, -1.5, 1.5));
  from_host(k, random_vec(std::size_t(s.Sk) * Dk, rng, -1.5, 1.5));
  from_host(v, random_vec(std::size_t(s.Sk) * Dk, rng));
  from_host(dO, random_vec(std::size_t(s.Sq) * Dq, rng));
  const Host qh = to_host(q), kh = to_host(k), vh = to_host(v), dOh = to_host(dO);  // the rounded inputs
  const auto qp = ids(s.qpos), kp = ids(s.kpos), ql = ids(q_lo_of(s));
  const auto ref = naive_attention_forward(s, qh, kh, vh);
  Host rdq, rdk, rdv;
  naive_attention_backward(s, qh, kh, vh, dOh, rdq, rdk, rdv);

  using A = minilst::accum_t<T>;
  Mat<T> o("o", s.Sq, Dq);
  Mat<A> lse("lse", s.Sq, s.Hq), delta("delta", s.Sq, s.Hq);
  Kokkos::deep_copy(o, T(7.0f));  // the forward overwrites: rows that see no key too
  Kokkos::deep_copy(lse, A(7.0f));
  K::attention_forward<T>(choice, o, lse, q, k, v, qp, ql, kp, s.h);
  const Host lh = to_host(lse);
  double lse_err = 0;
  for (std::size_t e = 0; e < lh.size(); ++e) {
    EXPECT_EQ(lh[e] == kNegInf, ref.lse[e] == kNegInf) << tag << ": lse -inf at " << e;
    if (ref.lse[e] != kNegInf) lse_err = std::max(lse_err, std::fabs(lh[e] - ref.lse[e]));
  }
  const double eo = rel_err(to_host(o), ref.o);
  note(tag + " o vs float64", eo);
  note(tag + " lse vs float64 (max abs)", lse_err);
  EXPECT_LE(eo, tol) << tag;
  EXPECT_LE(lse_err, tol) << tag;

  const auto backward = [&](const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv) {
    K::attention_backward<T>(choice, dq, dk, dv, delta, dO, o, lse, q, k, v, qp, ql, kp, s.h);
  };
  Mat<T> dq("dq", s.Sq, Dq), dk("dk", s.Sk, Dk), dv("dv", s.Sk, Dk);
  backward(dq, dk, dv);
  const Host g[3] = {to_host(dq), to_host(dk), to_host(dv)};
  const Host* r[3] = {&rdq, &rdk, &rdv};
  const char* names[3] = {"dq", "dk", "dv"};
  for (int t = 0; t < 3; ++t) {
    const double e = rel_err(g[t], *r[t]);
    note(tag + " " + names[t] + " vs float64", e);
    EXPECT_LE(e, 2 * tol) << tag << " " << names[t];
  }
  Mat<T> dq2("dq2", s.Sq, Dq), dk2("dk2", s.Sk, Dk), dv2("dv2", s.Sk, Dk);
  backward(dq2, dk2, dv2);
  EXPECT_TRUE(to_host(dq2) == g[0] && to_host(dk2) == g[1] && to_host(dv2) == g[2]) << tag << ": not deterministic";
  backward(dq2, dk2, dv2);  // += : twice the gradient
  const Host twice[3] = {to_host(dq2), to_host(dk2), to_host(dv2)};
  for (int t = 0; t < 3; ++t) EXPECT_LE(rel_err(twice[t], scaled(g[t], 2.0)), tol) << tag << " " << names[t] << " +=";
}

}  // namespace

#ifdef KOKKOS_ENABLE_CUDA
namespace {
// Shapes around the kernels' 64-row blocks and 64-key steps: causal, GQA 4:1 and MHA,
// shuffled positions with Sq != Sk, a ring block that the first queries do not see.
std::vector<std::pair<std::string, AttnShape>> tensor_core_shapes(int h, Rng& rng) {
  return {{"causal S=200 GQA 4:1", AttnShape{200, 200, 8, 2, h, iota_pos(200), iota_pos(200)}},
          {"shuffled Sq=130 Sk=190 MHA", AttnShape{130, 190, 2, 2, h, shuffled(iota_pos(130, 40), rng),
                                                    shuffled(iota_pos(190), rng)}},
          {"ring block overlapping the queries", AttnShape{70, 64, 4, 1, h, iota_pos(70), iota_pos(64, 30)}}};
}
}  // namespace

TEST(Attention, TensorCoreBf16MatchesFloat64OnEveryShapeAndHeadDim) {
  Rng rng(61);
  for (int h : {16, 32, 64, 128})
    for (const auto& [name, shape] : tensor_core_shapes(h, rng))
      check_matrix_attention<minilst::bf16>(attention_by(minilst::AttentionKernel::tensor_core), shape, 62 + h, 2e-2,
                                            "bf16 h=" + std::to_string(h) + " " + name);
}

TEST(Attention, TensorCoreTf32MatchesFloat64OnEveryShapeAndHeadDim) {
  Rng rng(63);
  for (int h : {16, 32, 64, 128}) {
    if (const auto why = K::tensor_core_unavailable<float>(h); !why.empty()) {  // tf32 h = 128 needs 185 KiB
      std::printf("  tf32 h=%d not on this GPU (%s): a run asking for it is refused\n", h, why.c_str());
      minilst::KernelChoice ask;
      ask.attention = minilst::AttentionKernel::tensor_core;
      EXPECT_NE(minilst::kernel_choice_refusal(ask, minilst::Precision::float32, h), "");
      continue;
    }
    for (const auto& [name, shape] : tensor_core_shapes(h, rng))
      check_matrix_attention<float>(attention_by(minilst::AttentionKernel::tensor_core), shape, 64 + h, 5e-3,
                                    "tf32 h=" + std::to_string(h) + " " + name);
  }
}
#endif

#ifndef KOKKOS_ENABLE_CUDA
namespace {
// Shapes around the matrix-unit kernel's blocks (256 stacked query rows, 256 keys): causal
// GQA 4:1 over several blocks, shuffled positions with Sq != Sk and MHA, a ring block the
// first queries do not see, a head dim that is no multiple of 16.
std::vector<std::pair<std::string, AttnShape>> onednn_shapes(Rng& rng) {
  return {{"causal S=600 GQA 4:1 h=64", AttnShape{600, 600, 8, 2, 64, iota_pos(600), iota_pos(600)}},
          {"causal S=300 GQA 2:1 h=128", AttnShape{300, 300, 4, 2, 128, iota_pos(300), iota_pos(300)}},
          {"shuffled Sq=300 Sk=520 MHA h=40", AttnShape{300, 520, 2, 2, 40, shuffled(iota_pos(300, 200), rng),
                                                         shuffled(iota_pos(520), rng)}},
          {"ring block overlapping the queries", AttnShape{70, 280, 4, 1, 64, iota_pos(70, 200), iota_pos(280)}}};
}
}  // namespace

TEST(Attention, OnednnBf16MatchesFloat64OnEveryShape) {
  if (!K::attention_onednn_available()) {  // no oneDNN, or none that multiplies bf16 here: a run is refused
    EXPECT_NE(minilst::kernel_choice_refusal(attention_by(minilst::AttentionKernel::onednn), minilst::Precision::bf16, 64)
                  .find("run.attention_kernel: onednn"),
              std::string::npos);
    return;
  }
  Rng rng(71);
  for (const auto& [name, shape] : onednn_shapes(rng))
    check_matrix_attention<minilst::bf16>(attention_by(minilst::AttentionKernel::onednn), shape, 72, 2e-2,
                                          "onednn bf16 " + name);
}
#endif

// =============================================================================================
// Packed documents and sliding windows (key j visible to query i iff q_lo_i <= k_pos_j <= q_pos_i):
// every kernel of this build (portable in double, float and bf16; the reference in double and float;
// oneDNN's in bf16 where it runs; the tensor cores on CUDA builds) against the dense float64
// attention with the same mask, decided there without q_lo (sees(): same document, not after the
// query, within the window): forward o and lse (rows that see nothing: -inf), backward dq, dk,
// dv, deterministic, and += (check_matrix_attention). Also the optimised kernel's backward against
// finite differences on a masked problem.

namespace {
// Around the portable kernel's 64-key blocks and ~64-row stacked tiles (the matrix-unit
// kernels' 256s too, for the longest): odd document lengths and one-token documents, a
// document longer than a block, windows smaller and larger than a block, GQA, MQA, MHA,
// shuffled positions with Sq != Sk, and a ring block that the latest queries' windows miss.
std::vector<std::pair<std::string, AttnShape>> masked_shapes(int h, Rng& rng) {
  using minilst::SequenceMask;
  return {
      {"documents of 1, 1, 38, 1, 109, 7 tokens, S=157, GQA 4:2",
       AttnShape{157, 157, 4, 2, h, iota_pos(157), iota_pos(157), SequenceMask{{1, 2, 40, 41, 150}, 0}}},
      {"window 17, S=150, MQA 4:1", AttnShape{150, 150, 4, 1, h, iota_pos(150), iota_pos(150), SequenceMask{{}, 17}}},
      {"window 100, documents at 30 and 97, S=290, MHA",
       AttnShape{290, 290, 2, 2, h, iota_pos(290), iota_pos(290), SequenceMask{{0, 30, 97}, 100}}},
      {"shuffled Sq=70 Sk=150, documents at 50 and 120, window 40, GQA 4:2",
       AttnShape{70, 150, 4, 2, h, shuffled(iota_pos(70, 80), rng), shuffled(iota_pos(150), rng),
                 SequenceMask{{50, 120}, 40}}},
      {"ring block 100..163 against queries 150..209, window 30 (late rows see nothing)",
       AttnShape{60, 64, 4, 2, h, iota_pos(60, 150), iota_pos(64, 100), SequenceMask{{}, 30}}},
  };
}

minilst::KernelChoice reference_kernels() {
  minilst::KernelChoice c;
  c.variant = minilst::KernelVariant::reference;
  return c;
}
}  // namespace

TEST(Attention, MaskedDocumentsAndWindowsEveryKernelMatchesDenseFloat64) {
  Rng rng(80);
  const auto portable = attention_by(minilst::AttentionKernel::portable);
  std::uint64_t seed = 81;
  for (const auto& named : masked_shapes(16, rng)) {
    const std::string& name = named.first;
    const AttnShape& shape = named.second;  // (a plain name: lambdas may not capture structured bindings in C++17)
    int blind = 0;  // rows that see no key (the ring block's): o = 0 and lse = -inf checked below
    for (int i = 0; i < shape.Sq; ++i)
      blind += std::none_of(shape.kpos.begin(), shape.kpos.end(),
                            [&](std::int64_t kp) { return sees(shape, shape.qpos[i], kp); });
    if (name.find("ring block") != std::string::npos) EXPECT_GT(blind, 0) << name << ": no row without a visible key";
    check_matrix_attention<double>(portable, shape, seed, 1e-12, "portable double " + name);
    check_matrix_attention<float>(portable, shape, seed, 2e-5, "portable float " + name);
    check_matrix_attention<minilst::bf16>(portable, shape, seed, 2e-2, "portable bf16 " + name);
    check_matrix_attention<double>(reference_kernels(), shape, seed, 1e-12, "reference double " + name);
    check_matrix_attention<float>(reference_kernels(), shape, seed, 2e-5, "reference float " + name);
#ifndef KOKKOS_ENABLE_CUDA
    if (K::attention_onednn_available())
      check_matrix_attention<minilst::bf16>(attention_by(minilst::AttentionKernel::onednn), shape, seed, 2e-2,
                                            "onednn bf16 " + name);
#else
    for (int hd : {16, 64})
      if (K::tensor_core_unavailable<minilst::bf16>(hd).empty()) {
        AttnShape wide = shape;
        wide.h = hd;
        check_matrix_attention<minilst::bf16>(attention_by(minilst::AttentionKernel::tensor_core), wide, seed, 2e-2,
                                              "tensor cores bf16 h=" + std::to_string(hd) + " " + name);
      }
#endif
    ++seed;
  }
}

TEST(Attention, MaskedBackwardMatchesFiniteDifferences) {
  // gqa_shape()'s arbitrary positions with documents starting at 6 and 13 and a window of 5.
  AttnShape s = gqa_shape();
  s.mask = minilst::SequenceMask{{6, 13}, 5};
  check_attention_vs_naive(s, 82, "masked gqa");
  check_attention_fd(s, 83, "attention masked gqa");
}
