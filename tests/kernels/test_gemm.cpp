// gemm (kernels/gemm.hpp, gemm_reference.hpp, the bf16 paths gemm_bf16_*): C = alpha op(A) op(B) + beta C.
//  * The optimised gemm against a naive host loop: the four op combinations on row sub-ranges
//    (rows outside untouched), k = 0, beta = 0 over NaN, shape errors; in double.
//  * The reference twin against the optimised gemm, double and float: four op combinations,
//    beta 0 over NaN and beta 1, k = 0, shape errors.
//  * bf16 in, fp32 accumulation, C in fp32 or bf16, against a double-precision product of the
//    same inputs, past every block edge of the host paths, on every bf16 path this build and CPU
//    can run (fp32_tiles always; avx512_bf16 with AVX512_BF16; cublas on CUDA builds).
//  * The float instantiation against double.
// Each check prints its observed error as "[err] <what> = <value>".
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/kernel_choice.hpp"
#include "kernel_test_util.hpp"
#include "kernels/bf16.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_reference.hpp"

using namespace minilst::kernel_test;
namespace K = minilst::kernels;
using minilst::bf16;
using minilst::KernelChoice;

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

// =============================================================================================
// The optimised gemm against a naive loop (double).

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
        K::gemm_optimized<double>(KernelChoice{}, oa, ob, 0.75, A, B, beta, C);
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
  K::gemm_optimized<double>(KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B, 1.0, C);
  EXPECT_EQ(to_host(C), c0) << "k == 0, beta = 1: C unchanged";
  K::gemm_optimized<double>(KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B, 0.5, C);
  EXPECT_EQ(to_host(C), scaled(c0, 0.5)) << "k == 0, beta = 0.5: C halved";
  Kokkos::deep_copy(C, std::numeric_limits<double>::quiet_NaN());
  K::gemm_optimized<double>(KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B, 0.0, C);
  EXPECT_EQ(to_host(C), Host(12, 0.0)) << "k == 0, beta = 0: C overwritten with 0, even NaN";
  Mat<double> At("At", 0, 3);  // op(A) = A^T: [3, 0]
  fill_random(C, rng);
  K::gemm_optimized<double>(KernelChoice{}, K::Op::T, K::Op::N, 1.0, At, B, 0.0, C);
  EXPECT_EQ(to_host(C), Host(12, 0.0));
}

TEST(Gemm, BetaZeroOverwritesCEvenIfNaN) {
  // beta = 0 means C = alpha op(A) op(B): whatever C held (an uninitialised buffer) is ignored.
  Rng rng(41);
  Mat<double> A("A", 3, 4), B("B", 4, 5), C("C", 3, 5);
  fill_random(A, rng);
  fill_random(B, rng);
  Kokkos::deep_copy(C, std::numeric_limits<double>::quiet_NaN());
  K::gemm_optimized<double>(KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B, 0.0, C);
  const Host expect = naive_gemm(K::Op::N, K::Op::N, 1.0, to_host(A), 4, to_host(B), 5, 0.0,
                                 Host(15, 0.0), 3, 5, 4);
  EXPECT_LE(max_abs_diff(to_host(C), expect), 1e-14);
}

TEST(Gemm, ShapeMismatchThrows) {
  Mat<double> A("A", 3, 4), B("B", 5, 2), C("C", 3, 2), B_ok("B", 4, 2), C_bad("C", 2, 2);
  EXPECT_THROW(K::gemm_optimized<double>(KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B, 0.0, C), std::invalid_argument);
  EXPECT_THROW(K::gemm_optimized<double>(KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B_ok, 0.0, C_bad), std::invalid_argument);
  EXPECT_THROW(K::gemm_optimized<double>(KernelChoice{}, K::Op::T, K::Op::N, 1.0, A, B_ok, 0.0, C), std::invalid_argument);
  EXPECT_NO_THROW(K::gemm_optimized<double>(KernelChoice{}, K::Op::N, K::Op::N, 1.0, A, B_ok, 0.0, C));
}

// =============================================================================================
// The reference twin (kernels/gemm_reference.hpp) against the optimised gemm.

namespace {
template <class T>
void check_gemm_reference(double tolerance) {
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
        K::gemm_optimized<T>(KernelChoice{}, oa, ob, alpha, Ar, Br, T(beta), minilst::rows(C_opt, pad, pad + m));
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

TEST(Gemm, ReferenceMatchesOptimisedAllOpsBetaZeroAndOneDouble) { check_gemm_reference<double>(1e-14); }
TEST(Gemm, ReferenceMatchesOptimisedAllOpsBetaZeroAndOneFloat) { check_gemm_reference<float>(1e-6); }

// =============================================================================================
// bf16: bf16 in, fp32 accumulation, C in fp32 or bf16, on every bf16 path.

namespace {
// A [rows, cols] matrix of bf16 values drawn from normal(0, 1), and its values in double.
struct Bf16Matrix {
  Mat<bf16> dev;
  std::vector<double> value;
  Bf16Matrix(std::size_t rows, std::size_t cols, std::uint64_t seed) : dev("m", rows, cols), value(rows * cols) {
    auto h = Kokkos::create_mirror_view(dev);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) {
        h(i, j) = bf16(normal(rng));
        value[i * cols + j] = float(h(i, j));
      }
    Kokkos::deep_copy(dev, h);
  }
};

// C = alpha op(A) op(B) + beta C0 in double; A, B stored [rows, cols] as given.
std::vector<double> product(K::Op oa, K::Op ob, double alpha, const Bf16Matrix& A, std::size_t a_cols,
                            const Bf16Matrix& B, std::size_t b_cols, double beta, const std::vector<double>& C0,
                            std::size_t m, std::size_t n, std::size_t k) {
  std::vector<double> C(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p) {
        const double a = oa == K::Op::N ? A.value[i * a_cols + p] : A.value[p * a_cols + i];
        const double b = ob == K::Op::N ? B.value[p * b_cols + j] : B.value[j * b_cols + p];
        s += a * b;
      }
      C[i * n + j] = alpha * s + beta * C0[i * n + j];
    }
  return C;
}

// The bf16 paths this build and CPU can run (fp32_tiles always, with each fp32 path for
// its tiles; avx512_bf16 with AVX512_BF16; onednn where oneDNN multiplies bf16; cublas on
// CUDA builds), each as a run's choice.
std::vector<KernelChoice> bf16_paths() {
  std::vector<KernelChoice> out;
  for (const auto& [path, name] : minilst::EnumNames<minilst::GemmPath>::table)
    if (minilst::runnable_gemm_bf16_paths() & minilst::path_bit(path)) {
      KernelChoice c;
      c.gemm_bf16 = path;
      out.push_back(c);
      if (path != minilst::GemmPath::fp32_tiles) continue;
      for (const auto& [fp32, fp32_name] : minilst::EnumNames<minilst::GemmPath>::table)
        if (fp32 != c.gemm_fp32 && (minilst::runnable_gemm_fp32_paths() & minilst::path_bit(fp32))) {
          KernelChoice t = c;
          t.gemm_fp32 = fp32;
          out.push_back(t);
        }
    }
  return out;
}
// The fp32 paths this build and CPU can run (blas always; onednn in host builds with it).
std::vector<KernelChoice> fp32_paths() {
  std::vector<KernelChoice> out;
  for (const auto& [path, name] : minilst::EnumNames<minilst::GemmPath>::table)
    if (minilst::runnable_gemm_fp32_paths() & minilst::path_bit(path)) {
      KernelChoice c;
      c.gemm_fp32 = path;
      out.push_back(c);
    }
  return out;
}
}  // namespace

// Shapes past each block edge of the host paths (dot: 756 rows, 1024 columns, 384
// deep; tiles: 512, 1024, 512), an odd last panel after full ones, tiny and empty
// (k = 0) products, on every path this machine has. 1030 x 2060 has 9 tiles: with 2
// threads (the OpenMP test stage) the tiles run one per thread (tiles::per_thread),
// edge tiles included.
TEST(Gemm, Bf16MatchesDoublePrecisionAcrossPathsTilesOpsAndOutputTypes) {
  using K::Op;
  struct Shape { std::size_t m, n, k; };
  for (const KernelChoice& choice : bf16_paths())
  for (const Shape sh : {Shape{780, 1060, 520}, Shape{1513, 40, 385}, Shape{1030, 2060, 16}, Shape{7, 5, 3},
                         Shape{257, 33, 1}, Shape{9, 17, 0}, Shape{1030, 2060, 0}})
    for (Op oa : {Op::N, Op::T})
      for (Op ob : {Op::N, Op::T}) {
        const std::size_t m = sh.m, n = sh.n, k = sh.k;
        const Bf16Matrix A(oa == Op::N ? m : k, oa == Op::N ? k : m, 1), B(ob == Op::N ? k : n, ob == Op::N ? n : k, 2);
        const Bf16Matrix C0(m, n, 3);
        const std::size_t ac = oa == Op::N ? k : m, bc = ob == Op::N ? n : k;
        const auto ref = product(oa, ob, 1.0, A, ac, B, bc, 1.0, C0.value, m, n, k);  // C = op(A) op(B) + C0
        const std::string where = minilst::describe(choice) + " m=" + std::to_string(m) +
                                  " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                  (oa == Op::N ? " N" : " T") + (ob == Op::N ? "N" : "T");
        // fp32 C (a weight gradient): fp32 accumulation, error ~ k 2^-24 of the row's magnitude
        Mat<float> c32("c32", m, n);
        {
          auto h = Kokkos::create_mirror_view(c32);
          for (std::size_t i = 0; i < m * n; ++i) h.data()[i] = float(C0.value[i]);
          Kokkos::deep_copy(c32, h);
        }
        K::gemm_optimized(choice, oa, ob, bf16(1.0f), A.dev, B.dev, bf16(1.0f), c32);
        auto h32 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), c32);
        // bf16 C: the fp32 result rounded once (relative 2^-9), plus the accumulation's error
        Mat<bf16> c16("c16", m, n);
        Kokkos::deep_copy(c16, C0.dev);
        K::gemm_optimized(choice, oa, ob, bf16(1.0f), A.dev, B.dev, bf16(1.0f), c16);
        auto h16 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), c16);
        const double scale = std::sqrt(double(k)) + 1.0;  // the typical magnitude of an entry
        for (std::size_t i = 0; i < m; ++i)
          for (std::size_t j = 0; j < n; ++j) {
            const double r = ref[i * n + j];
            ASSERT_NEAR(h32(i, j), r, 1e-5 * scale) << where << " fp32 C at " << i << "," << j;
            ASSERT_NEAR(float(h16(i, j)), r, std::abs(r) * std::ldexp(1.0, -8) + 1e-5 * scale)
                << where << " bf16 C at " << i << "," << j;
          }
      }
}

// beta = 0 overwrites C (NaN in C does not survive), as the BLAS does, on every path.
TEST(Gemm, Bf16BetaZeroOverwrites) {
  const Bf16Matrix A(3, 4, 4), B(4, 5, 5);
  for (const KernelChoice& choice : bf16_paths()) {
    Mat<bf16> C("c", 3, 5);
    Kokkos::deep_copy(C, bf16(std::numeric_limits<float>::quiet_NaN()));
    K::gemm_optimized(choice, K::Op::N, K::Op::N, bf16(2.0f), A.dev, B.dev, bf16(0.0f), C);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C);
    const auto ref = product(K::Op::N, K::Op::N, 2.0, A, 4, B, 5, 0.0, std::vector<double>(15, 0.0), 3, 5, 4);
    for (std::size_t i = 0; i < 15; ++i)
      EXPECT_NEAR(float(h.data()[i]), ref[i], std::abs(ref[i]) * 0.004 + 1e-6) << minilst::name_of(choice.gemm_bf16);
  }
}

// =============================================================================================
// float

TEST(Gemm, FloatAgreesWithDouble) {
  Rng rng(60);
  Mat<double> a("a", 2, 4), b("b", 2, 4), c("c", 2, 2);
  fill_random(a, rng);
  fill_random(b, rng);
  const Mat<float> af = mat_of<float>("af", 2, 4, to_host(a)), bf = mat_of<float>("bf", 2, 4, to_host(b));
  Mat<float> cf("cf", 2, 2);
  K::gemm_optimized<double>(KernelChoice{}, K::Op::N, K::Op::T, 1.0, a, b, 0.0, c);
  K::gemm_optimized<float>(KernelChoice{}, K::Op::N, K::Op::T, 1.0f, af, bf, 0.0f, cf);
  expect_le("gemm NT float vs double (max abs)", max_abs_diff(to_host(cf), to_host(c)), 1e-5);
}

// Every fp32 path against double on the same shapes, every op, beta 0 and 1, and k = 0.
TEST(Gemm, FloatEveryPathMatchesDouble) {
  using K::Op;
  Rng rng(61);
  struct Shape { int m, n, k; };
  for (const KernelChoice& choice : fp32_paths())
    for (const Shape sh : {Shape{300, 170, 129}, Shape{7, 5, 3}, Shape{9, 17, 0}})
      for (Op oa : {Op::N, Op::T})
        for (Op ob : {Op::N, Op::T})
          for (const double beta : {0.0, 1.0}) {
            const int m = sh.m, n = sh.n, k = sh.k;
            Mat<double> a("a", oa == Op::N ? m : k, oa == Op::N ? k : m), b("b", ob == Op::N ? k : n, ob == Op::N ? n : k),
                c("c", m, n);
            fill_random(a, rng);
            fill_random(b, rng);
            fill_random(c, rng);
            const Mat<float> af = mat_of<float>("af", a.extent(0), a.extent(1), to_host(a)),
                             bf = mat_of<float>("bf", b.extent(0), b.extent(1), to_host(b));
            Mat<float> cf = mat_of<float>("cf", m, n, to_host(c));
            K::gemm_optimized<double>(KernelChoice{}, oa, ob, 1.0, a, b, beta, c);
            K::gemm_optimized<float>(choice, oa, ob, 1.0f, af, bf, float(beta), cf);
            expect_le(minilst::describe(choice) + " m=" + std::to_string(m) + " k=" + std::to_string(k) +
                          (oa == Op::N ? " N" : " T") + (ob == Op::N ? "N" : "T") + " beta=" + std::to_string(int(beta)),
                      max_abs_diff(to_host(cf), to_host(c)), 1e-4);
          }
}
