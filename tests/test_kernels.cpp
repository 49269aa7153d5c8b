// Unit tests of the miniLST kernels (kernels/*.hpp), in double unless stated.
//
// What is checked and how:
//  * Every backward against central finite differences (FD) of its forward: for random inputs and a
//    random output cotangent R, L = sum(out * R); the analytic gradient is the backward run with
//    dy = R, the FD gradient is (L(x + h) - L(x - h)) / 2h for EVERY entry of every differentiable
//    input (h = 1e-5 max(1, |x|)); they must agree norm-wise, ||g - g_fd|| / ||g_fd|| <= 1e-6.
//    The harness checks itself: a gradient 1% off, or one entry off, must be flagged.
//  * Forwards against naive references written here (attention: explicit score matrix, masked
//    softmax, to 1e-12, also beyond the kernel's 32-row / 64-key tiles).
//  * The contracts in the headers: accumulation (+=) versus overwrite (=), in-place aliasing
//    (swiglu), rope's inverse, attention's ring merge over key blocks, rows with no visible key,
//    ignored labels, gemm's four op combinations on row sub-ranges, AdamW against a scalar loop.
//  * The float instantiations compile and roughly agree with double.
// Each check prints its observed error as "[err] <what> = <value>".
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
#include <utility>
#include <vector>

#include "kernel_test_util.hpp"
#include "core/kernel_choice.hpp"
#include "kernels/adamw.hpp"
#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/select.hpp"
#include "kernels/swiglu.hpp"
#include "kernels/tile_ops.hpp"
#include "kernels/types.hpp"

namespace {

using namespace minilst::kernel_test;
namespace K = minilst::kernels;

// ---------------------------------------------------------------------------------------------
// Helpers beyond kernel_test_util.hpp.

// A device copy (for kernels that use an input as scratch).
template <class T>
Mat<T> clone(const Mat<T>& m) {
  Mat<T> c(m.label() + "_copy", m.extent(0), m.extent(1));
  Kokkos::deep_copy(c, m);
  return c;
}

template <class T = double>
Mat<T> mat(std::size_t r, std::size_t c, const char* label = "m") {
  return Mat<T>(label, r, c);
}

template <class T>
Mat<T> copy_of(const Mat<T>& x) {
  Mat<T> y(std::string(x.label()) + "_copy", x.extent(0), x.extent(1));
  Kokkos::deep_copy(y, x);
  return y;
}

Host scaled(Host a, double s) {
  for (auto& e : a) e *= s;
  return a;
}

// Asserts ||analytic - fd|| / ||fd|| <= kFdTol, prints it, and returns it.
double expect_grad_close(const std::string& what, const Host& analytic, const Host& fd) {
  EXPECT_GT(norm(fd), 0.0) << what << ": FD gradient is zero, the check would be vacuous";
  const double e = rel_err(analytic, fd);
  note(what + " vs FD", e);
  EXPECT_LE(e, kFdTol) << what;
  return e;
}

// ---------------------------------------------------------------------------------------------
// Naive attention reference: explicit [Sq, Sk] score matrix per head, masked softmax.

struct AttnShape {
  int Sq, Sk, Hq, Gk, h;
  std::vector<std::int64_t> qpos, kpos;
};

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
        if (s.kpos[j] > s.qpos[i]) continue;
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
        if (s.kpos[j] > s.qpos[i]) continue;
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
  Vec<std::int64_t> qp, kp;
  AttnProblem(const AttnShape& shape, Rng& rng)
      : s(shape),
        q("q", shape.Sq, shape.Hq * shape.h),
        k("k", shape.Sk, shape.Gk * shape.h),
        v("v", shape.Sk, shape.Gk * shape.h),
        qp(ids(shape.qpos)),
        kp(ids(shape.kpos)) {
    fill_random(q, rng, -1.5, 1.5);  // wide enough for peaked softmax rows
    fill_random(k, rng, -1.5, 1.5);
    fill_random(v, rng);
  }
  std::pair<Mat<T>, Mat<T>> forward() const {
    Mat<T> o("o", s.Sq, s.Hq * s.h), lse("lse", s.Sq, s.Hq);
    K::attention_forward<T>(o, lse, q, k, v, qp, kp, s.h);
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
  K::attention_backward<T>(dq, dk, dv, delta, dO, o, lse, P.q, P.k, P.v, P.qp, P.kp, P.s.h);
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
// The FD harness itself.

TEST(FiniteDifferenceHarness, MatchesAnalyticGradientOfSmoothFunction) {
  // L(x) = sum_ij sin(x_ij) R_ij + (sum x)^2 ; dL/dx = cos(x) R + 2 sum x.
  Rng rng(1);
  Mat<double> x("x", 4, 5);
  fill_random(x, rng, -2, 2);
  const Host R = random_vec(20, rng);
  auto loss = [&] {
    const Host xh = to_host(x);
    double s = 0, t = 0;
    for (std::size_t n = 0; n < xh.size(); ++n) s += std::sin(xh[n]) * R[n], t += xh[n];
    return s + t * t;
  };
  const Host xh = to_host(x);
  double t = 0;
  for (double e : xh) t += e;
  Host g(xh.size());
  for (std::size_t n = 0; n < g.size(); ++n) g[n] = std::cos(xh[n]) * R[n] + 2 * t;
  const Host fd = fd_grad(x, loss);
  expect_grad_close("sin/square", g, fd);
  EXPECT_EQ(to_host(x), xh) << "fd_grad must restore its input";
}

TEST(FiniteDifferenceHarness, FlagsAWrongGradient) {
  // The rmsnorm dx is right; scaled by 1.01, or with one entry off by 1e-4, it must be flagged.
  Rng rng(2);
  const int S = 5, d = 8;
  const double eps = 1e-5;
  Mat<double> x("x", S, d), y("y", S, d), R("R", S, d), dx("dx", S, d);
  Vec<double> w("w", d), dw("dw", d);
  fill_random(x, rng);
  fill_random(w, rng, 0.5, 1.5);
  fill_random(R, rng);
  K::rmsnorm_backward<double>(dx, dw, clone(R), x, w, eps);  // its dy is scratch
  const Host Rh = to_host(R);
  auto loss = [&] {
    K::rmsnorm_forward<double>(y, x, w, eps);
    return dot(to_host(y), Rh);
  };
  const Host fd = fd_grad(x, loss), g = to_host(dx);
  EXPECT_LE(rel_err(g, fd), kFdTol);
  const double e_scaled = rel_err(scaled(g, 1.01), fd);
  Host g_one = g;
  g_one[7] += 1e-4;
  const double e_one = rel_err(g_one, fd);
  note("grad*1.01 vs FD (must be > 1e-6)", e_scaled);
  note("grad with one entry +1e-4 vs FD (must be > 1e-6)", e_one);
  EXPECT_GT(e_scaled, kFdTol);
  EXPECT_GT(e_one, kFdTol);
}

// =============================================================================================
// gemm

namespace {
// C = alpha op(A) op(B) + beta C on row-major host copies.
Host naive_gemm(K::Op oa, K::Op ob, double alpha, const Host& A, std::size_t a_cols, const Host& B,
                std::size_t b_cols, double beta, const Host& C, std::size_t m, std::size_t n,
                std::size_t k) {
  Host out(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p) {
        const double a = oa == K::Op::N ? A[i * a_cols + p] : A[p * a_cols + i];
        const double b = ob == K::Op::N ? B[p * b_cols + j] : B[j * b_cols + p];
        s += a * b;
      }
      out[i * n + j] = alpha * s + (beta == 0.0 ? 0.0 : beta * C[i * n + j]);
    }
  return out;
}
}  // namespace

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// The attention kernels' host tile product, blocked for the build's ISA
// (tile::host::blocking<A>()), against the plain triple loop: every row count from 1
// to 13 (the blocks' tails), the column counts callers pad to (multiples of 16),
// A read directly and transposed, = and +=.
template <class A>
void check_tile_product() {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int M = 1; M <= 13; ++M)
    for (int N : {16, 32, 48, 64, 80, 128})
      for (int K : {1, 7, 64})
        for (bool transposed : {false, true})
          for (bool accumulate : {false, true}) {
            std::vector<A> a(std::size_t(M) * K), b(std::size_t(K) * N), c(std::size_t(M) * N), want;
            for (auto* v : {&a, &b, &c})
              for (auto& x : *v) x = A(u(rng));
            want = c;
            const int a_m = transposed ? 1 : K, a_k = transposed ? M : 1;  // A(m, k) = a[m a_m + k a_k]
            for (int m = 0; m < M; ++m)
              for (int n = 0; n < N; ++n) {
                A sum = accumulate ? want[m * N + n] : A(0);
                for (int k = 0; k < K; ++k) sum += a[m * a_m + k * a_k] * b[k * N + n];
                want[m * N + n] = sum;
              }
            K::tile::host::product(M, N, K, a.data(), a_m, a_k, b.data(), N, c.data(), N, accumulate);
            double err = 0;
            for (std::size_t i = 0; i < c.size(); ++i) err = std::max(err, double(std::abs(c[i] - want[i])));
            ASSERT_LT(err, sizeof(A) == 4 ? 1e-4 : 1e-12)
                << K::tile::host::blocking<A>() << ": M " << M << " N " << N << " K " << K << " transposed "
                << transposed << " accumulate " << accumulate;
          }
}

TEST(TileProduct, EveryRowTailAndPaddedWidthMatchesTheLoop) {
  check_tile_product<float>();
  check_tile_product<double>();
  std::printf("  host tile blocking: %s (float), %s (double)\n", K::tile::host::blocking<float>().c_str(),
              K::tile::host::blocking<double>().c_str());
}
#endif

TEST(Gemm, AllOpCombinationsOnRowSubRangesMatchNaive) {
  Rng rng(3);
  const std::size_t m = 5, n = 7, k = 4, pad = 3;  // sub-ranges start at row 2 of a taller matrix
  for (K::Op oa : {K::Op::N, K::Op::T})
    for (K::Op ob : {K::Op::N, K::Op::T})
      for (double beta : {0.0, 1.0}) {
        const std::size_t ar = oa == K::Op::N ? m : k, ac = oa == K::Op::N ? k : m;
        const std::size_t br = ob == K::Op::N ? k : n, bc = ob == K::Op::N ? n : k;
        Mat<double> A_full("A", ar + pad, ac), B_full("B", br + pad, bc), C_full("C", m + pad, n);
        fill_random(A_full, rng);
        fill_random(B_full, rng);
        fill_random(C_full, rng);
        const Host C_before = to_host(C_full);
        auto A = minilst::rows(A_full, 2, 2 + ar);
        auto B = minilst::rows(B_full, 1, 1 + br);
        auto C = minilst::rows(C_full, 2, 2 + m);
        const Host expect = naive_gemm(oa, ob, 0.75, to_host(A), ac, to_host(B), bc, beta,
                                       to_host(C), m, n, k);
        K::gemm_optimized<double>(minilst::KernelChoice{}, oa, ob, 0.75, A, B, beta, C);
        const std::string tag = std::string("gemm ") + (oa == K::Op::N ? "N" : "T") +
                                (ob == K::Op::N ? "N" : "T") + " beta=" + std::to_string(int(beta));
        const double e = max_abs_diff(to_host(C), expect);
        note(tag + " (max abs)", e);
        EXPECT_LE(e, 1e-14) << tag;
        // Rows of C_full outside the sub-range are untouched.
        const Host after = to_host(C_full);
        for (std::size_t i = 0; i < m + pad; ++i) {
          if (i >= 2 && i < 2 + m) continue;
          for (std::size_t j = 0; j < n; ++j) EXPECT_EQ(after[i * n + j], C_before[i * n + j]) << tag;
        }
      }
}

TEST(Gemm, KZeroScalesC) {
  Mat<double> A("A", 3, 0), B("B", 0, 4), C("C", 3, 4);
  Rng rng(4);
  fill_random(C, rng);
  const Host c0 = to_host(C);
  K::gemm_optimized<double>(minilst::KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B, 1.0, C);
  EXPECT_EQ(to_host(C), c0) << "k == 0, beta = 1: C unchanged";
  K::gemm_optimized<double>(minilst::KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B, 0.5, C);
  EXPECT_EQ(to_host(C), scaled(c0, 0.5)) << "k == 0, beta = 0.5: C halved";
  Kokkos::deep_copy(C, std::numeric_limits<double>::quiet_NaN());
  K::gemm_optimized<double>(minilst::KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B, 0.0, C);
  EXPECT_EQ(to_host(C), Host(12, 0.0)) << "k == 0, beta = 0: C overwritten with 0, even NaN";
  Mat<double> At("At", 0, 3);  // op(A) = A^T: [3, 0]
  fill_random(C, rng);
  K::gemm_optimized<double>(minilst::KernelChoice{}, K::Op::T, K::Op::N, 1.0, At, B, 0.0, C);
  EXPECT_EQ(to_host(C), Host(12, 0.0));
}

TEST(Gemm, BetaZeroOverwritesCEvenIfNaN) {
  // beta = 0 means C = alpha op(A) op(B): whatever C held (an uninitialised buffer) is ignored.
  Rng rng(41);
  Mat<double> A("A", 3, 4), B("B", 4, 5), C("C", 3, 5);
  fill_random(A, rng);
  fill_random(B, rng);
  Kokkos::deep_copy(C, std::numeric_limits<double>::quiet_NaN());
  K::gemm_optimized<double>(minilst::KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B, 0.0, C);
  const Host expect = naive_gemm(K::Op::N, K::Op::N, 1.0, to_host(A), 4, to_host(B), 5, 0.0,
                                 Host(15, 0.0), 3, 5, 4);
  EXPECT_LE(max_abs_diff(to_host(C), expect), 1e-14);
}

TEST(Gemm, ShapeMismatchThrows) {
  Mat<double> A("A", 3, 4), B("B", 5, 2), C("C", 3, 2), B_ok("B", 4, 2), C_bad("C", 2, 2);
  EXPECT_THROW(K::gemm_optimized<double>(minilst::KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B, 0.0, C), std::invalid_argument);
  EXPECT_THROW(K::gemm_optimized<double>(minilst::KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B_ok, 0.0, C_bad), std::invalid_argument);
  EXPECT_THROW(K::gemm_optimized<double>(minilst::KernelChoice{}, K::Op::T, K::Op::N, 1.0, A, B_ok, 0.0, C), std::invalid_argument);
  EXPECT_NO_THROW(K::gemm_optimized<double>(minilst::KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B_ok, 0.0, C));
}

// =============================================================================================
// embedding

TEST(Embedding, ForwardGathersRows) {
  Rng rng(5);
  const std::vector<std::int64_t> tok = {3, 1, 3, 6, 0, 3, 1, 5, 2};
  Mat<double> E("E", 7, 5), x("x", tok.size(), 5);
  fill_random(E, rng);
  K::embedding_forward<double>(x, ids(tok), E);
  const Host Eh = to_host(E), xh = to_host(x);
  for (std::size_t i = 0; i < tok.size(); ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(xh[i * 5 + j], Eh[tok[i] * 5 + j]);
}

TEST(Embedding, BackwardMatchesFiniteDifferencesWithRepeatedTokens) {
  Rng rng(6);
  const std::vector<std::int64_t> tok = {3, 1, 3, 6, 0, 3, 1, 5, 2};  // 3 thrice, 1 twice, 4 never
  const int V = 7, d = 5, S = int(tok.size());
  auto tv = ids(tok);
  Mat<double> E("E", V, d), x("x", S, d), R("R", S, d), dE("dE", V, d);
  fill_random(E, rng);
  fill_random(R, rng);
  K::embedding_backward<double>(dE, tv, R);
  const Host Rh = to_host(R);
  auto loss = [&] {
    K::embedding_forward<double>(x, tv, E);
    return dot(to_host(x), Rh);
  };
  const Host g = to_host(dE);
  expect_grad_close("embedding dE", g, fd_grad(E, loss));
  for (int j = 0; j < d; ++j) EXPECT_EQ(g[4 * d + j], 0.0) << "unused token row";
  // Accumulation: a second backward onto the same dE doubles it.
  K::embedding_backward<double>(dE, tv, R);
  EXPECT_LE(max_abs_diff(to_host(dE), scaled(g, 2.0)), 1e-15);
}

// =============================================================================================
// rmsnorm

namespace {
struct RmsProblem {
  int S = 5, d = 8;
  double eps = 1e-5;
  Mat<double> x{"x", 5, 8}, y{"y", 5, 8}, R{"R", 5, 8};
  Vec<double> w{"w", 8};
  explicit RmsProblem(Rng& rng) {
    fill_random(x, rng);
    fill_random(w, rng, 0.5, 1.5);
    fill_random(R, rng);
  }
};
}  // namespace

TEST(RmsNorm, ForwardMatchesNaive) {
  Rng rng(7);
  RmsProblem P(rng);
  K::rmsnorm_forward<double>(P.y, P.x, P.w, P.eps);
  const Host xh = to_host(P.x), wh = to_host(P.w), yh = to_host(P.y);
  Host ref(xh.size());
  for (int i = 0; i < P.S; ++i) {
    double ss = 0;
    for (int j = 0; j < P.d; ++j) ss += xh[i * P.d + j] * xh[i * P.d + j];
    const double r = 1.0 / std::sqrt(ss / P.d + P.eps);
    for (int j = 0; j < P.d; ++j) ref[i * P.d + j] = xh[i * P.d + j] * r * wh[j];
  }
  const double e = max_abs_diff(yh, ref);
  note("rmsnorm forward vs naive (max abs)", e);
  EXPECT_LE(e, 1e-14);
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  Rng rng(8);
  RmsProblem P(rng);
  Mat<double> dx("dx", P.S, P.d);
  Vec<double> dw("dw", P.d);
  K::rmsnorm_backward<double>(dx, dw, clone(P.R), P.x, P.w, P.eps);
  const Host Rh = to_host(P.R);
  auto loss = [&] {
    K::rmsnorm_forward<double>(P.y, P.x, P.w, P.eps);
    return dot(to_host(P.y), Rh);
  };
  expect_grad_close("rmsnorm dx", to_host(dx), fd_grad(P.x, loss));
  expect_grad_close("rmsnorm dw", to_host(dw), fd_grad(P.w, loss));
}

TEST(RmsNorm, BackwardAccumulatesIntoDxAndDw) {
  Rng rng(9);
  RmsProblem P(rng);
  Mat<double> dx0("dx0", P.S, P.d), dx("dx", P.S, P.d);
  Vec<double> dw0("dw0", P.d), dw("dw", P.d);
  K::rmsnorm_backward<double>(dx0, dw0, clone(P.R), P.x, P.w, P.eps);  // from zero
  fill_random(dx, rng);
  fill_random(dw, rng);
  const Host dx_init = to_host(dx), dw_init = to_host(dw);
  K::rmsnorm_backward<double>(dx, dw, clone(P.R), P.x, P.w, P.eps);
  Host ex = to_host(dx0), ew = to_host(dw0);
  for (std::size_t n = 0; n < ex.size(); ++n) ex[n] += dx_init[n];
  for (std::size_t n = 0; n < ew.size(); ++n) ew[n] += dw_init[n];
  EXPECT_LE(max_abs_diff(to_host(dx), ex), 1e-15);
  EXPECT_LE(max_abs_diff(to_host(dw), ew), 1e-15);
}

// =============================================================================================
// rope

namespace {
constexpr double kRopeTheta = 10000.0;
// Rotate-half RoPE on host, the header's formula.
Host naive_rope(const Host& x, const std::vector<std::int64_t>& pos, int width, int h) {
  Host y = x;
  const int half = h / 2;
  for (std::size_t i = 0; i < pos.size(); ++i)
    for (int n = 0; n < width / h; ++n)
      for (int j = 0; j < half; ++j) {
        const double a = double(pos[i]) * std::pow(kRopeTheta, -2.0 * j / h);
        const std::size_t lo = i * width + n * h + j, hi = lo + half;
        y[lo] = x[lo] * std::cos(a) - x[hi] * std::sin(a);
        y[hi] = x[hi] * std::cos(a) + x[lo] * std::sin(a);
      }
  return y;
}
const std::vector<std::int64_t> kRopePos = {7, 0, 3, 100, 2, 4099};  // arbitrary, not contiguous
constexpr int kRopeHeads = 3, kRopeDim = 8;
}  // namespace

TEST(Rope, ForwardMatchesNaive) {
  Rng rng(10);
  const int W = kRopeHeads * kRopeDim;
  Mat<double> x("x", kRopePos.size(), W);
  fill_random(x, rng);
  const Host x0 = to_host(x);
  K::rope_forward<double>(x, ids(kRopePos), kRopeDim, kRopeTheta);
  const double e = max_abs_diff(to_host(x), naive_rope(x0, kRopePos, W, kRopeDim));
  note("rope forward vs naive (max abs)", e);
  EXPECT_LE(e, 1e-14);
}

TEST(Rope, BackwardMatchesFiniteDifferencesMultiHeadArbitraryPositions) {
  Rng rng(11);
  const int S = int(kRopePos.size()), W = kRopeHeads * kRopeDim;
  auto pos = ids(kRopePos);
  Mat<double> x("x", S, W), y("y", S, W), R("R", S, W);
  fill_random(x, rng);
  fill_random(R, rng);
  Mat<double> dx = copy_of(R);
  K::rope_backward<double>(dx, pos, kRopeDim, kRopeTheta);  // in place on the gradient
  const Host Rh = to_host(R);
  auto loss = [&] {
    Kokkos::deep_copy(y, x);
    K::rope_forward<double>(y, pos, kRopeDim, kRopeTheta);
    return dot(to_host(y), Rh);
  };
  expect_grad_close("rope dx", to_host(dx), fd_grad(x, loss));
}

TEST(Rope, BackwardInvertsForwardAndPositionZeroIsIdentity) {
  Rng rng(12);
  const int S = int(kRopePos.size()), W = kRopeHeads * kRopeDim;
  auto pos = ids(kRopePos);
  Mat<double> x("x", S, W);
  fill_random(x, rng);
  const Host x0 = to_host(x);
  K::rope_forward<double>(x, pos, kRopeDim, kRopeTheta);
  const Host xf = to_host(x);
  EXPECT_GT(max_abs_diff(xf, x0), 1e-3) << "forward must change rows at position != 0";
  for (int c = 0; c < W; ++c) EXPECT_EQ(xf[1 * W + c], x0[1 * W + c]) << "position 0, column " << c;
  K::rope_backward<double>(x, pos, kRopeDim, kRopeTheta);
  const double e = max_abs_diff(to_host(x), x0);
  note("rope backward(forward(x)) - x (max abs)", e);
  EXPECT_LE(e, 1e-14);
}

// =============================================================================================
// swiglu

namespace {
Host naive_swiglu(const Host& g, const Host& u) {
  Host m(g.size());
  for (std::size_t n = 0; n < g.size(); ++n) m[n] = g[n] / (1.0 + std::exp(-g[n])) * u[n];
  return m;
}
}  // namespace

TEST(SwiGlu, ForwardMatchesNaiveAndIsFiniteForExtremeGates) {
  Rng rng(13);
  Mat<double> g("g", 4, 6), u("u", 4, 6), m("m", 4, 6);
  fill_random(g, rng, -4, 4);
  fill_random(u, rng);
  K::swiglu_forward<double>(m, g, u);
  const double e = max_abs_diff(to_host(m), naive_swiglu(to_host(g), to_host(u)));
  note("swiglu forward vs naive (max abs)", e);
  EXPECT_LE(e, 1e-15);
  Host gx = to_host(g);
  gx[0] = 800, gx[1] = -800, gx[2] = 40, gx[3] = -40;
  from_host(g, gx);
  K::swiglu_forward<double>(m, g, u);
  Mat<double> dg("dg", 4, 6), du("du", 4, 6);
  K::swiglu_backward<double>(dg, du, u, g, u);
  for (const Host& out : {to_host(m), to_host(dg), to_host(du)})
    for (double e2 : out) EXPECT_TRUE(std::isfinite(e2));
}

TEST(SwiGlu, BackwardMatchesFiniteDifferences) {
  Rng rng(14);
  Mat<double> g("g", 4, 6), u("u", 4, 6), m("m", 4, 6), R("R", 4, 6), dg("dg", 4, 6), du("du", 4, 6);
  fill_random(g, rng, -4, 4);
  fill_random(u, rng);
  fill_random(R, rng);
  K::swiglu_backward<double>(dg, du, R, g, u);
  const Host Rh = to_host(R);
  auto loss = [&] {
    K::swiglu_forward<double>(m, g, u);
    return dot(to_host(m), Rh);
  };
  expect_grad_close("swiglu dg", to_host(dg), fd_grad(g, loss));
  expect_grad_close("swiglu du", to_host(du), fd_grad(u, loss));
}

TEST(SwiGlu, BackwardInPlaceOnGateAndUpMatchesOutOfPlace) {
  Rng rng(15);
  Mat<double> g("g", 4, 6), u("u", 4, 6), R("R", 4, 6), dg("dg", 4, 6), du("du", 4, 6);
  fill_random(g, rng, -4, 4);
  fill_random(u, rng);
  fill_random(R, rng);
  K::swiglu_backward<double>(dg, du, R, g, u);
  Mat<double> g2 = copy_of(g), u2 = copy_of(u);
  K::swiglu_backward<double>(g2, u2, R, g2, u2);  // dg aliases g, du aliases u (as the MLP does)
  EXPECT_EQ(to_host(g2), to_host(dg));
  EXPECT_EQ(to_host(u2), to_host(du));
}

// =============================================================================================
// attention

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
    K::attention_forward<double>(ob[b], lb[b], P.q, block(P.k, b), block(P.v, b), P.qp, kp_block(b), s.h);
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
                                  block(P.k, b), block(P.v, b), P.qp, kp_block(b), s.h);
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
  K::attention_backward<double>(dq, dk, dv, delta, R, o, lse, P.q, P.k, P.v, P.qp, P.kp, s.h);
  const Host got[3] = {to_host(dq), to_host(dk), to_host(dv)};
  for (int t = 0; t < 3; ++t) {
    Host expect = init[t];
    for (std::size_t n = 0; n < expect.size(); ++n) expect[n] += g[t][n];
    EXPECT_LE(max_abs_diff(got[t], expect), 1e-14) << "gradient " << t;
  }
}

// =============================================================================================
// The tensor-core kernels of CUDA builds against the float64 reference (which kernel a run
// chooses: tests/test_kernel_choice.cpp).

#ifdef KOKKOS_ENABLE_CUDA
namespace {
// The kernel choice that selects the tensor-core attention, as a run's would.
constexpr minilst::KernelChoice kTensorCores{minilst::KernelVariant::optimized, minilst::AttentionKernel::tensor_core,
                                             minilst::GemmPath::cublas, minilst::GemmPath::blas};

// One problem through the tensor-core kernels (selected by the choice, as a run
// selects them) against the float64 reference on the same T-rounded inputs:
// forward o and lse (written over junk), backward dq, dk, dv (norm-wise relative
// errors); the backward twice into fresh zeros is bitwise the same; a second
// backward adds to the first. K and V are row ranges of larger buffers, as a ring's
// key blocks are.
template <class T>
void check_tensor_core(const AttnShape& s, std::uint64_t seed, double tol, const std::string& tag) {
  ASSERT_EQ(K::tensor_core_unavailable<T>(s.h), "") << tag;
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
  const auto qp = ids(s.qpos), kp = ids(s.kpos);
  const auto ref = naive_attention_forward(s, qh, kh, vh);
  Host rdq, rdk, rdv;
  naive_attention_backward(s, qh, kh, vh, dOh, rdq, rdk, rdv);

  using A = minilst::accum_t<T>;
  Mat<T> o("o", s.Sq, Dq);
  Mat<A> lse("lse", s.Sq, s.Hq), delta("delta", s.Sq, s.Hq);
  Kokkos::deep_copy(o, T(7.0f));  // the forward overwrites: rows that see no key too
  Kokkos::deep_copy(lse, A(7.0f));
  K::attention_forward<T>(kTensorCores, o, lse, q, k, v, qp, kp, s.h);
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
    K::attention_backward<T>(kTensorCores, dq, dk, dv, delta, dO, o, lse, q, k, v, qp, kp, s.h);
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

// Shapes around the kernels' 64-row blocks and 64-key steps: causal, GQA 4:1 and MHA,
// shuffled positions with Sq != Sk, a ring block that the first queries do not see.
std::vector<std::pair<std::string, AttnShape>> tensor_core_shapes(int h, Rng& rng) {
  return {{"causal S=200 GQA 4:1", AttnShape{200, 200, 8, 2, h, iota_pos(200), iota_pos(200)}},
          {"shuffled Sq=130 Sk=190 MHA", AttnShape{130, 190, 2, 2, h, shuffled(iota_pos(130, 40), rng),
                                                    shuffled(iota_pos(190), rng)}},
          {"ring block overlapping the queries", AttnShape{70, 64, 4, 1, h, iota_pos(70), iota_pos(64, 30)}}};
}
}  // namespace

TEST(TensorCoreAttention, Bf16MatchesFloat64OnEveryShapeAndHeadDim) {
  Rng rng(61);
  for (int h : {16, 32, 64, 128})
    for (const auto& [name, shape] : tensor_core_shapes(h, rng))
      check_tensor_core<minilst::bf16>(shape, 62 + h, 2e-2, "bf16 h=" + std::to_string(h) + " " + name);
}

TEST(TensorCoreAttention, Tf32MatchesFloat64OnEveryShapeAndHeadDim) {
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
      check_tensor_core<float>(shape, 64 + h, 5e-3, "tf32 h=" + std::to_string(h) + " " + name);
  }
}
#endif

// =============================================================================================
// cross entropy

namespace {
// Direct sum_i (lse_i - logit_i[label_i]) over non-ignored rows.
double naive_ce_sum(const Host& logits, const std::vector<std::int64_t>& labels, int V) {
  double s = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == minilst::kIgnoreLabel) continue;
    double mx = -std::numeric_limits<double>::infinity();
    for (int c = 0; c < V; ++c) mx = std::max(mx, logits[i * V + c]);
    double z = 0;
    for (int c = 0; c < V; ++c) z += std::exp(logits[i * V + c] - mx);
    s += mx + std::log(z) - logits[i * V + labels[i]];
  }
  return s;
}
const std::vector<std::int64_t> kLabels = {3, -100, 0, 10, 5, -100, 7};  // two ignored rows
}  // namespace

TEST(CrossEntropy, LossMatchesDirectAndGradientMatchesFiniteDifferences) {
  Rng rng(40);
  const int C = int(kLabels.size()), V = 11;
  const double grad_scale = 1.0 / 5.0;  // 1 / N_valid
  auto lab = ids(kLabels);
  Mat<double> logits("logits", C, V), work("work", C, V);
  fill_random(logits, rng, -3, 3);
  const Host l0 = to_host(logits);
  const double ref = naive_ce_sum(l0, kLabels, V);
  Kokkos::deep_copy(work, logits);
  const double got = K::cross_entropy_fused<double>(work, lab, grad_scale);
  const double el = std::fabs(got * grad_scale - ref * grad_scale);
  note("cross entropy scaled loss vs direct (abs)", el);
  EXPECT_LE(el, 1e-14);
  const Host dlogits = to_host(work);
  for (int i = 0; i < C; ++i) {
    if (kLabels[i] != minilst::kIgnoreLabel) continue;
    for (int c = 0; c < V; ++c) EXPECT_EQ(dlogits[i * V + c], 0.0) << "ignored row " << i;
  }
  // FD of the kernel's own scaled loss (it overwrites its input, so run it on a scratch copy).
  auto loss = [&] {
    Kokkos::deep_copy(work, logits);
    return grad_scale * K::cross_entropy_fused<double>(work, lab, grad_scale);
  };
  expect_grad_close("cross entropy dlogits", dlogits, fd_grad(logits, loss));
  // Ignored rows contribute nothing: changing them leaves the loss unchanged.
  Host l1 = l0;
  for (int c = 0; c < V; ++c) l1[1 * V + c] += 50.0 * (c + 1), l1[5 * V + c] = -7.0;
  from_host(work, l1);
  EXPECT_EQ(K::cross_entropy_fused<double>(work, lab, grad_scale), got);
}

TEST(CrossEntropy, StableForLargeLogits) {
  const int V = 5;
  const std::vector<std::int64_t> labels = {2, 4};
  Host l = {1000, 1001, 1002, 999, 1000.5, -1000, -1001, -1002, -999, -1000.5};
  Mat<double> logits("logits", 2, V);
  from_host(logits, l);
  const double got = K::cross_entropy_fused<double>(logits, ids(labels), 1.0);
  const double ref = naive_ce_sum(l, labels, V);
  EXPECT_TRUE(std::isfinite(got));
  EXPECT_NEAR(got, ref, 1e-12);
  const Host d = to_host(logits);
  for (int i = 0; i < 2; ++i) {
    double rs = 0;
    for (int c = 0; c < V; ++c) rs += d[i * V + c];
    // p = exp(logit - lse) with lse ~ 1000 (ulp 1.1e-13): the row sum is 0 to ~1e-13, not 1e-16.
    EXPECT_NEAR(rs, 0.0, 1e-12) << "softmax - onehot sums to zero";
  }
}

// =============================================================================================
// AdamW

TEST(AdamW, TwoStepsMatchScalarReference) {
  Rng rng(50);
  const int n = 9;
  K::AdamWHyper hp;
  hp.lr = 1e-2, hp.beta1 = 0.8, hp.beta2 = 0.9, hp.eps = 1e-6, hp.weight_decay = 0.05;
  Vec<double> p("p", n), g("g", n), m("m", n), v("v", n);
  fill_random(p, rng, -2, 2);
  Host ph = to_host(p), mh(n, 0.0), vh(n, 0.0);
  const Host p_init = ph;
  for (long step = 1; step <= 2; ++step) {
    Host gh = random_vec(n, rng);
    gh[4] = 0.0;  // a parameter with no gradient only decays
    from_host(g, gh);
    K::adamw_update<double>(p, g, m, v, step, hp);
    const double c1 = 1.0 - std::pow(hp.beta1, double(step)), c2 = 1.0 - std::pow(hp.beta2, double(step));
    for (int i = 0; i < n; ++i) {
      mh[i] = hp.beta1 * mh[i] + (1 - hp.beta1) * gh[i];
      vh[i] = hp.beta2 * vh[i] + (1 - hp.beta2) * gh[i] * gh[i];
      ph[i] -= hp.lr * ((mh[i] / c1) / (std::sqrt(vh[i] / c2) + hp.eps) + hp.weight_decay * ph[i]);
    }
    const double ep = max_abs_diff(to_host(p), ph), em = max_abs_diff(to_host(m), mh),
                 ev = max_abs_diff(to_host(v), vh);
    note("adamw step " + std::to_string(step) + " p/m/v vs scalar (max abs)", std::max({ep, em, ev}));
    EXPECT_LE(ep, 1e-14) << "step " << step;
    EXPECT_LE(em, 1e-14) << "step " << step;
    EXPECT_LE(ev, 1e-14) << "step " << step;
  }
  // Decoupled weight decay: with g = 0 throughout, p shrinks by exactly (1 - lr wd) per step.
  const double decay = 1 - hp.lr * hp.weight_decay;
  EXPECT_NEAR(to_host(p)[4], p_init[4] * decay * decay, 1e-15);
}

// =============================================================================================
// float instantiations

TEST(FloatInstantiation, RmsNormAndAttentionAgreeWithDouble) {
  Rng rng(60);
  // rmsnorm forward + backward.
  const int S = 5, d = 16;
  Mat<double> x("x", S, d), y("y", S, d), R("R", S, d), dx("dx", S, d);
  Vec<double> w("w", d), dw("dw", d);
  fill_random(x, rng);
  fill_random(w, rng, 0.5, 1.5);
  fill_random(R, rng);
  Mat<float> xf("xf", S, d), yf("yf", S, d), Rf("Rf", S, d), dxf("dxf", S, d);
  Vec<float> wf("wf", d), dwf("dwf", d);
  from_host(xf, to_host(x));
  from_host(wf, to_host(w));
  from_host(Rf, to_host(R));
  K::rmsnorm_forward<double>(y, x, w, 1e-5);
  K::rmsnorm_forward<float>(yf, xf, wf, 1e-5);
  K::rmsnorm_backward<double>(dx, dw, clone(R), x, w, 1e-5);
  K::rmsnorm_backward<float>(dxf, dwf, clone(Rf), xf, wf, 1e-5);
  const double ey = max_abs_diff(to_host(yf), to_host(y));
  const double eg = std::max(rel_err(to_host(dxf), to_host(dx)), rel_err(to_host(dwf), to_host(dw)));
  note("rmsnorm float vs double y (max abs)", ey);
  note("rmsnorm float vs double dx/dw (rel)", eg);
  EXPECT_LE(ey, 1e-5);
  EXPECT_LE(eg, 1e-5);

  // attention forward + backward: small odd head dim (tiles packed and padded), and
  // h = 16 over several tiles with arbitrary positions (K and V rows read in place).
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

  // The other kernels' float instantiations compile and run.
  Mat<float> gf2("g", 2, 4), uf("u", 2, 4), mf("m", 2, 4), Ef("E", 3, 4), xe("xe", 2, 4);
  fill_random(gf2, rng);
  fill_random(uf, rng);
  fill_random(Ef, rng);
  K::swiglu_forward<float>(mf, gf2, uf);
  K::swiglu_backward<float>(gf2, uf, mf, gf2, uf);
  K::rope_forward<float>(mf, ids({0, 5}), 4, kRopeTheta);
  K::rope_backward<float>(mf, ids({0, 5}), 4, kRopeTheta);
  K::embedding_forward<float>(xe, ids({2, 0}), Ef);
  K::embedding_backward<float>(Ef, ids({2, 0}), xe);
  K::gemm_optimized<float>(minilst::KernelChoice{}, K::Op::N, K::Op::T, 1.0f, mf, xe, 0.0f, Mat<float>("c", 2, 2));
  Mat<float> lf("lf", 2, 4);
  fill_random(lf, rng);
  const double ce = K::cross_entropy_fused<float>(lf, ids({1, 3}), 0.5);
  EXPECT_TRUE(std::isfinite(ce));
  Vec<float> pf("p", 4), gvf("g", 4), mvf("m", 4), vvf("v", 4);
  fill_random(pf, rng);
  fill_random(gvf, rng);
  K::adamw_update<float>(pf, gvf, mvf, vvf, 1, K::AdamWHyper{});
  for (double e : to_host(pf)) EXPECT_TRUE(std::isfinite(e));
}
