// The plain reference kernels (kernels/*_reference.hpp) against the optimised ones they
// stand in for, in double (to ~1e-12 relative) and in float (to the float rounding of two
// different summation orders and exps), on the same inputs.
//
// What is checked and how:
//  * attention: forward (o, lse) and backward (dq, dk, dv, the delta workspace) on odd sizes,
//    Sq != Sk, GQA (Hq=4, Gk=2), MHA, MQA (Gk=1), head dims 8, 12 and 64, 150 tokens (more than
//    the optimised kernel's 64-row and 64-key tiles), shuffled and zigzag positions, and ring
//    blocks whose keys all follow some (or all) of the queries. Both backwards are given the same
//    o and lse, so each comparison isolates one kernel. Rows with no visible key (o = 0,
//    lse = -inf, zero gradients), the += contract (backward twice: the gradients double), the
//    ring merge of key blocks, and the reference's gradient against finite differences (FD).
//  * cross entropy, swiglu (also in place), rmsnorm (+= into dx, dw; dy as scratch), the
//    embedding scatter-add (+=, repeated tokens; bitwise equal), gemm (four op combinations,
//    beta 0 over NaN, beta 1, k = 0, shape errors).
// Errors: norm-wise relative ||ref - opt|| / ||opt|| unless stated; lse as max abs difference
// (equal infinities count as 0). Each check prints its observed error as "[err] <what> = <value>".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernel_test_util.hpp"
#include "kernels/attention.hpp"
#include "kernels/attention_merge.hpp"
#include "kernels/attention_reference.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/cross_entropy_reference.hpp"
#include "kernels/embedding.hpp"
#include "kernels/embedding_reference.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_reference.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rmsnorm_reference.hpp"
#include "kernels/swiglu.hpp"
#include "kernels/swiglu_reference.hpp"
#include "kernels/types.hpp"

namespace {

using namespace minilst::kernel_test;
namespace K = minilst::kernels;

// Tolerance of a reference-versus-optimised comparison in storage type T.
template <class T>
constexpr double tol(double for_double, double for_float) {
  return std::is_same<T, double>::value ? for_double : for_float;
}
template <class T>
std::string type_name() {
  return std::is_same<T, double>::value ? "double" : "float";
}

// ---------------------------------------------------------------------------------------------
// Helpers beyond kernel_test_util.hpp.

// A View of the given shape holding the values of a host vector.
template <class T>
Mat<T> mat_of(const char* label, std::size_t r, std::size_t c, const Host& v) {
  Mat<T> m(std::string(label), r, c);
  from_host(m, v);
  return m;
}
template <class T>
Vec<T> vec_of(const char* label, const Host& v) {
  Vec<T> x(std::string(label), v.size());
  from_host(x, v);
  return x;
}

// Prints err and expects it at most limit.
void expect_le(const std::string& what, double err, double limit) {
  note(what, err);
  EXPECT_LE(err, limit) << what;
}

std::vector<std::int64_t> concat(std::vector<std::int64_t> a, const std::vector<std::int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---------------------------------------------------------------------------------------------
// Attention problems: the same double inputs for the double and the float runs.

struct AttnShape {
  std::string name;
  int Sq, Sk, Hq, Gk, h;
  std::vector<std::int64_t> qpos, kpos;
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
  Vec<std::int64_t> qp, kp;
  explicit AttnProblem(const AttnData& d)
      : s(d.s),
        q(mat_of<T>("q", s.Sq, std::size_t(s.Hq) * s.h, d.q)),
        k(mat_of<T>("k", s.Sk, std::size_t(s.Gk) * s.h, d.k)),
        v(mat_of<T>("v", s.Sk, std::size_t(s.Gk) * s.h, d.v)),
        dO(mat_of<T>("dO", s.Sq, std::size_t(s.Hq) * s.h, d.dO)),
        qp(ids(s.qpos)),
        kp(ids(s.kpos)) {}
  // (o, lse) of the reference or the optimised forward.
  std::pair<Mat<T>, Mat<A>> forward(bool reference) const {
    Mat<T> o("o", s.Sq, std::size_t(s.Hq) * s.h);
    Mat<A> lse("lse", s.Sq, s.Hq);
    Kokkos::deep_copy(o, T(3));  // forward overwrites (=): stale content must not matter
    Kokkos::deep_copy(lse, A(3));
    if (reference)
      K::attention_forward_reference<T>(o, lse, q, k, v, qp, kp, s.h);
    else
      K::attention_forward<T>(o, lse, q, k, v, qp, kp, s.h);
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
    K::attention_backward_reference<T>(dq, dk, dv, delta, P.dO, o, lse, P.q, P.k, P.v, P.qp, P.kp, s.h);
  else
    K::attention_backward<T>(dq, dk, dv, delta, P.dO, o, lse, P.q, P.k, P.v, P.qp, P.kp, s.h);
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

}  // namespace

// =============================================================================================
// attention

TEST(AttentionReference, MatchesOptimisedOnAllShapesDouble) {
  check_attention_shapes<double>(1e-12, 1e-12, 1e-12);
}

TEST(AttentionReference, MatchesOptimisedOnAllShapesFloat) {
  check_attention_shapes<float>(2e-6, 5e-6, 5e-6);
}

TEST(AttentionReference, RowsWithNoVisibleKeyHaveZeroOutputMinusInfLseAndZeroGradients) {
  // The ring block: queries 0..74 precede every key; the all-masked block: every query does.
  for (const AttnShape& s : attention_shapes()) {
    if (s.name.find("ring block") == std::string::npos) continue;
    const AttnProblem<double> P(AttnData(s, 200));
    const auto [o, lse] = P.forward(true);
    const AttnGrads g = attention_grads(P, o, lse, true);
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

TEST(AttentionReference, BackwardAccumulatesCalledTwiceGradientsDouble) {
  for (const AttnShape& s : attention_shapes()) {
    if (s.Sq > 20) continue;  // the small odd GQA / MHA / MQA problems
    const AttnProblem<double> P(AttnData(s, 300));
    const auto [o, lse] = P.forward(true);
    Mat<double> dq("dq", s.Sq, std::size_t(s.Hq) * s.h), dk("dk", s.Sk, std::size_t(s.Gk) * s.h),
        dv("dv", s.Sk, std::size_t(s.Gk) * s.h), delta("delta", s.Sq, s.Hq);
    for (int call = 0; call < 2; ++call)
      K::attention_backward_reference<double>(dq, dk, dv, delta, P.dO, o, lse, P.q, P.k, P.v, P.qp, P.kp, s.h);
    const AttnGrads once = attention_grads(P, o, lse, true);
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
                                            P.kp, s.h);
    K::attention_backward<double>(out_opt[0], out_opt[1], out_opt[2], delta, P.dO, o, lse, P.q, P.k, P.v,
                                  P.qp, P.kp, s.h);
    double ea = 0;
    for (int t = 0; t < 3; ++t) ea = std::max(ea, max_abs_diff(to_host(out[t]), to_host(out_opt[t])));
    expect_le("attention " + s.name + ": init + g, ref vs opt (max abs)", ea, 1e-12);
  }
}

TEST(AttentionReference, BackwardMatchesFiniteDifferencesOfReferenceForward) {
  const AttnShape s = attention_shapes()[0];  // GQA, odd sizes, arbitrary positions, blind rows
  const AttnData data(s, 400);
  const AttnProblem<double> P(data);
  const auto [o, lse] = P.forward(true);
  const AttnGrads g = attention_grads(P, o, lse, true);
  auto loss = [&] { return dot(to_host(P.forward(true).first), data.dO); };  // L = sum(o * dO)
  const std::pair<const char*, std::pair<Mat<double>, const Host*>> inputs[] = {
      {"dq", {P.q, &g.dq}}, {"dk", {P.k, &g.dk}}, {"dv", {P.v, &g.dv}}};
  for (const auto& [name, in] : inputs) {
    const Host fd = fd_grad(in.first, loss);
    EXPECT_GT(norm(fd), 0.0) << name << ": the FD gradient is zero, the check would be vacuous";
    expect_le(std::string("attention reference ") + name + " vs FD (rel)", rel_err(*in.second, fd), kFdTol);
  }
}

TEST(AttentionReference, RingKeyBlocksMergeToFullAttention) {
  // The zigzag rank's queries against all 300 keys, as two ring blocks of 150 keys: its own
  // (chunks 0 and 3) and the other rank's (chunks 1 and 2, invisible to the queries of chunk 0).
  // Forward: blocks merged by attention_merge = the whole; backward per block with the whole's
  // o and lse: dq adds up over the blocks, dk and dv are the blocks' rows of the whole.
  const auto zigzag = concat(iota_pos(75, 0), iota_pos(75, 225));
  const AttnShape s{"ring", 150, 300, 4, 2, 8, zigzag, concat(zigzag, iota_pos(150, 75))};
  const AttnProblem<double> P(AttnData(s, 500));
  const int Dq = s.Hq * s.h, half = 150;
  auto block = [&](auto view, int b) { return minilst::rows(view, b * half, (b + 1) * half); };
  auto kp_block = [&](int b) { return Kokkos::subview(P.kp, std::make_pair(b * half, (b + 1) * half)); };
  const auto [o, lse] = P.forward(true);
  Mat<double> O("O", s.Sq, Dq), L("L", s.Sq, s.Hq), ob("ob", s.Sq, Dq), lb("lb", s.Sq, s.Hq);
  Kokkos::deep_copy(L, kNegInf);  // the running state before any block
  for (int b = 0; b < 2; ++b) {
    K::attention_forward_reference<double>(ob, lb, P.q, block(P.k, b), block(P.v, b), P.qp, kp_block(b), s.h);
    K::attention_merge<double>(O, L, ob, lb, s.h);
  }
  expect_le("attention reference ring-merged o vs whole (max abs)", max_abs_diff(to_host(O), to_host(o)), 1e-12);
  expect_le("attention reference ring-merged lse vs whole (max abs)", max_abs_diff(to_host(L), to_host(lse)), 1e-12);
  const AttnGrads whole = attention_grads(P, o, lse, true);
  Mat<double> dq("dq", s.Sq, Dq), dk("dk", s.Sk, s.Gk * s.h), dv("dv", s.Sk, s.Gk * s.h), delta("delta", s.Sq, s.Hq);
  for (int b = 0; b < 2; ++b)
    K::attention_backward_reference<double>(dq, block(dk, b), block(dv, b), delta, P.dO, o, lse, P.q, block(P.k, b),
                                            block(P.v, b), P.qp, kp_block(b), s.h);
  const double e = std::max({rel_err(to_host(dq), whole.dq), rel_err(to_host(dk), whole.dk),
                             rel_err(to_host(dv), whole.dv)});
  expect_le("attention reference ring blockwise backward vs whole (rel)", e, 1e-13);
}

// =============================================================================================
// cross entropy

namespace {
template <class T>
void check_cross_entropy(double tol_loss, double tol_grad) {
  Rng rng(600);
  const std::vector<std::int64_t> labels = {3, -100, 0, 36, 5, -100, 17, 30, 1};  // two ignored rows
  for (const int V : {37, 1001}) {
    const int C = int(labels.size());
    Host l = random_vec(std::size_t(C) * V, rng, -6, 6);
    for (int c = 0; c < V; ++c) l[std::size_t(4) * V + c] += 1000.0;  // a row of large logits
    const auto lab = ids(labels);
    const double grad_scale = 1.0 / 7.0;  // 1 / N_valid
    Mat<T> ref = mat_of<T>("logits", C, V, l), opt = mat_of<T>("logits", C, V, l);
    const double loss_ref = K::cross_entropy_fused_reference<T>(ref, lab, grad_scale);
    const double loss_opt = K::cross_entropy_fused<T>(opt, lab, grad_scale);
    const std::string tag = "cross entropy " + type_name<T>() + " V=" + std::to_string(V);
    expect_le(tag + ": loss ref vs opt (rel)", std::fabs(loss_ref - loss_opt) / std::fabs(loss_opt), tol_loss);
    const Host dr = to_host(ref);
    expect_le(tag + ": dlogits ref vs opt (rel)", rel_err(dr, to_host(opt)), tol_grad);
    for (int i = 0; i < C; ++i) {
      double rs = 0;
      for (int c = 0; c < V; ++c) {
        if (labels[i] == minilst::kIgnoreLabel) {
          EXPECT_EQ(dr[std::size_t(i) * V + c], 0.0) << "ignored row " << i;
        }
        rs += dr[std::size_t(i) * V + c];
      }
      EXPECT_NEAR(rs, 0.0, tol<T>(1e-12, 1e-6)) << "softmax - onehot sums to zero, row " << i;
    }
  }
}
}  // namespace

TEST(CrossEntropyReference, MatchesOptimisedDouble) { check_cross_entropy<double>(1e-13, 1e-12); }
TEST(CrossEntropyReference, MatchesOptimisedFloat) { check_cross_entropy<float>(1e-6, 1e-5); }

// =============================================================================================
// swiglu

namespace {
template <class T>
void check_swiglu(double tolerance) {
  Rng rng(700);
  const int C = 7, I = 45;
  // Ordinary gates, then gates where the sigmoid saturates both ways (compared on their own:
  // their large products would dominate the norm of the ordinary ones).
  Host ordinary = random_vec(std::size_t(C) * I, rng, -4, 4), extreme = ordinary;
  const double big[] = {-1000, -100, -30, -15, 15, 30, 100, 1000};
  for (std::size_t n = 0; n < extreme.size(); ++n) extreme[n] = big[n % 8] * (1 + 0.01 * ordinary[n]);
  const Host u = random_vec(ordinary.size(), rng), dm = random_vec(ordinary.size(), rng);
  for (const auto& [name, g] : {std::make_pair("ordinary gates", ordinary), std::make_pair("extreme gates", extreme)}) {
    const std::string tag = "swiglu " + type_name<T>() + " " + name;
    Mat<T> G = mat_of<T>("g", C, I, g), U = mat_of<T>("u", C, I, u), DM = mat_of<T>("dm", C, I, dm);
    Mat<T> m_ref("m", C, I), m_opt("m", C, I);
    K::swiglu_forward_reference<T>(m_ref, G, U);
    K::swiglu_forward<T>(m_opt, G, U);
    expect_le(tag + ": m ref vs opt (rel)", rel_err(to_host(m_ref), to_host(m_opt)), tolerance);
    Mat<T> dg_ref("dg", C, I), du_ref("du", C, I), dg_opt("dg", C, I), du_opt("du", C, I);
    K::swiglu_backward_reference<T>(dg_ref, du_ref, DM, G, U);
    K::swiglu_backward<T>(dg_opt, du_opt, DM, G, U);
    expect_le(tag + ": dg/du ref vs opt (rel, worst)",
              std::max(rel_err(to_host(dg_ref), to_host(dg_opt)), rel_err(to_host(du_ref), to_host(du_opt))),
              tolerance);
    // In place (dg = g, du = u) as the MLP backward calls it: the same as out of place.
    Mat<T> G2 = mat_of<T>("g", C, I, g), U2 = mat_of<T>("u", C, I, u);
    K::swiglu_backward_reference<T>(G2, U2, DM, G2, U2);
    EXPECT_EQ(to_host(G2), to_host(dg_ref)) << tag << ": in place dg";
    EXPECT_EQ(to_host(U2), to_host(du_ref)) << tag << ": in place du";
    for (const Host& x : {to_host(m_ref), to_host(dg_ref), to_host(du_ref)})
      for (double e : x) EXPECT_TRUE(std::isfinite(e)) << tag;
  }
}
}  // namespace

TEST(SwiGluReference, MatchesOptimisedExtremeGatesAndInPlaceDouble) { check_swiglu<double>(1e-14); }
TEST(SwiGluReference, MatchesOptimisedExtremeGatesAndInPlaceFloat) { check_swiglu<float>(1e-6); }

// =============================================================================================
// rmsnorm

namespace {
template <class T>
void check_rmsnorm(double tolerance) {
  Rng rng(800);
  const double eps = 1e-5;
  for (const int d : {37, 150}) {  // 150: more than the optimised dw's 64-column blocks, a partial last one
    const int S = 9;
    const std::string tag = "rmsnorm " + type_name<T>() + " d=" + std::to_string(d);
    const Host x = random_vec(std::size_t(S) * d, rng, -2, 2), w = random_vec(d, rng, 0.5, 1.5),
               dy = random_vec(std::size_t(S) * d, rng), dx0 = random_vec(std::size_t(S) * d, rng),
               dw0 = random_vec(d, rng);
    Mat<T> X = mat_of<T>("x", S, d, x), y_ref("y", S, d), y_opt("y", S, d);
    Vec<T> W = vec_of<T>("w", w);
    K::rmsnorm_forward_reference<T>(y_ref, X, W, eps);
    K::rmsnorm_forward<T>(y_opt, X, W, eps);
    expect_le(tag + ": y ref vs opt (rel)", rel_err(to_host(y_ref), to_host(y_opt)), tolerance);
    // dx and dw accumulate (+=) onto what is there; dy is scratch (overwritten with dy x r).
    Mat<T> dx_ref = mat_of<T>("dx", S, d, dx0), dx_opt = mat_of<T>("dx", S, d, dx0);
    Vec<T> dw_ref = vec_of<T>("dw", dw0), dw_opt = vec_of<T>("dw", dw0);
    Mat<T> dy_ref = mat_of<T>("dy", S, d, dy), dy_opt = mat_of<T>("dy", S, d, dy);
    K::rmsnorm_backward_reference<T>(dx_ref, dw_ref, dy_ref, X, W, eps);
    K::rmsnorm_backward<T>(dx_opt, dw_opt, dy_opt, X, W, eps);
    auto minus = [](Host a, const Host& b) {
      for (std::size_t n = 0; n < a.size(); ++n) a[n] -= b[n];
      return a;
    };
    // The increments, compared on their own scale (the initial values cancel).
    expect_le(tag + ": dx increment ref vs opt (rel)",
              rel_err(minus(to_host(dx_ref), dx0), minus(to_host(dx_opt), dx0)), tolerance * 100);
    expect_le(tag + ": dw increment ref vs opt (rel)",
              rel_err(minus(to_host(dw_ref), dw0), minus(to_host(dw_opt), dw0)), tolerance * 100);
    expect_le(tag + ": dx, dw ref vs opt (rel)",
              std::max(rel_err(to_host(dx_ref), to_host(dx_opt)), rel_err(to_host(dw_ref), to_host(dw_opt))),
              tolerance);
    expect_le(tag + ": dy scratch ref vs opt (rel)", rel_err(to_host(dy_ref), to_host(dy_opt)), tolerance);
  }
}
}  // namespace

TEST(RmsNormReference, MatchesOptimisedAccumulatingIntoDxDwDouble) { check_rmsnorm<double>(1e-14); }
TEST(RmsNormReference, MatchesOptimisedAccumulatingIntoDxDwFloat) { check_rmsnorm<float>(1e-6); }

// =============================================================================================
// embedding

namespace {
template <class T>
void check_embedding_backward() {
  Rng rng(900);
  const int S = 11, V = 6, d = 150;  // d: two full 64-column blocks and a partial one
  const std::vector<std::int64_t> tokens = {4, 0, 4, 2, 5, 4, 0, 1, 2, 4, 3};  // token 4 four times
  const Host dE0 = random_vec(std::size_t(V) * d, rng), dx = random_vec(std::size_t(S) * d, rng);
  Mat<T> ref = mat_of<T>("dE", V, d, dE0), opt = mat_of<T>("dE", V, d, dE0), DX = mat_of<T>("dx", S, d, dx);
  const auto tok = ids(tokens);
  K::embedding_backward_reference<T>(ref, tok, DX);
  K::embedding_backward<T>(opt, tok, DX);
  // Both add the tokens in order, column by column: bitwise equal.
  expect_le("embedding backward " + type_name<T>() + ": dE ref vs opt (max abs)",
            max_abs_diff(to_host(ref), to_host(opt)), 0.0);
  std::vector<T> acc(dE0.begin(), dE0.end());  // and dE0 + the scatter of dx, in order, in T
  for (int i = 0; i < S; ++i)
    for (int c = 0; c < d; ++c) acc[std::size_t(tokens[i]) * d + c] += T(dx[std::size_t(i) * d + c]);
  expect_le("embedding backward " + type_name<T>() + ": dE ref vs host loop (max abs)",
            max_abs_diff(to_host(ref), Host(acc.begin(), acc.end())), 0.0);
}
}  // namespace

TEST(EmbeddingReference, BackwardMatchesOptimisedBitwiseWithRepeatedTokensDouble) {
  check_embedding_backward<double>();
}
TEST(EmbeddingReference, BackwardMatchesOptimisedBitwiseWithRepeatedTokensFloat) {
  check_embedding_backward<float>();
}

// =============================================================================================
// gemm

namespace {
template <class T>
void check_gemm(double tolerance) {
  Rng rng(1000);
  const std::size_t m = 5, n = 7, k = 13, pad = 3;  // operands are rows [pad, pad + r) of taller matrices
  const T alpha = T(0.7);
  for (const K::Op oa : {K::Op::N, K::Op::T})
    for (const K::Op ob : {K::Op::N, K::Op::T})
      for (const double beta : {0.0, 1.0}) {
        const std::size_t ar = oa == K::Op::N ? m : k, ac = oa == K::Op::N ? k : m;
        const std::size_t br = ob == K::Op::N ? k : n, bc = ob == K::Op::N ? n : k;
        const Mat<T> A = mat_of<T>("A", ar + pad, ac, random_vec((ar + pad) * ac, rng));
        const Mat<T> B = mat_of<T>("B", br + pad, bc, random_vec((br + pad) * bc, rng));
        Host c0 = random_vec((m + pad) * n, rng);
        if (beta == 0.0) c0[pad * n + 2] = std::numeric_limits<double>::quiet_NaN();  // beta 0 ignores C
        Mat<T> C_ref = mat_of<T>("C", m + pad, n, c0), C_opt = mat_of<T>("C", m + pad, n, c0);
        auto Ar = minilst::rows(A, pad, pad + ar);
        auto Br = minilst::rows(B, pad, pad + br);
        K::gemm_reference<T>(oa, ob, alpha, Ar, Br, T(beta), minilst::rows(C_ref, pad, pad + m));
        K::gemm_optimized<T>(minilst::KernelChoice{}, oa, ob, alpha, Ar, Br, T(beta), minilst::rows(C_opt, pad, pad + m));
        const std::string tag = std::string("gemm ") + type_name<T>() + " " + (oa == K::Op::N ? "N" : "T") +
                                (ob == K::Op::N ? "N" : "T") + " beta=" + std::to_string(int(beta));
        expect_le(tag + ": C ref vs opt (rel)", rel_err(to_host(C_ref), to_host(C_opt)), tolerance);
      }
  // k = 0: C = beta C.
  Mat<T> A0("A0", 4, 0), B0("B0", 0, 3);
  Mat<T> C = mat_of<T>("C", 4, 3, random_vec(12, rng));
  const Host c_before = to_host(C);
  K::gemm_reference<T>(K::Op::N, K::Op::N, T(1), A0, B0, T(0.5), C);
  Host half = c_before;
  for (auto& e : half) e = double(T(0.5) * T(e));
  EXPECT_EQ(to_host(C), half) << "k = 0 scales C by beta";
  EXPECT_THROW(K::gemm_reference<T>(K::Op::N, K::Op::N, T(1), Mat<T>("a", 2, 3), Mat<T>("b", 4, 5), T(0),
                                    Mat<T>("c", 2, 5)),
               std::invalid_argument);
}
}  // namespace

TEST(GemmReference, MatchesOptimisedAllOpsBetaZeroAndOneDouble) { check_gemm<double>(1e-14); }
TEST(GemmReference, MatchesOptimisedAllOpsBetaZeroAndOneFloat) { check_gemm<float>(1e-6); }
