// The run's kernel choice (src/core/kernel_choice.hpp): what `auto` resolves to on
// this build and CPU, what is refused and with which key, and that a kernel given an
// unresolved choice refuses to run.
#include <gtest/gtest.h>

#include <string>

#include "core/kernel_choice.hpp"
#include "kernels/gemm_bf16_dot.hpp"
#include "kernels/gemm_onednn.hpp"
#include "kernels/gemm_rate.hpp"
#include "kernels/select.hpp"
#include "test_util.hpp"

using namespace minilst;

namespace {
KernelChoice autos() {
  KernelChoice c;
  c.attention = AttentionKernel::automatic;
  c.gemm_bf16 = GemmPath::automatic;
  c.gemm_fp32 = GemmPath::automatic;
  return c;
}
bool runnable(GemmPath p) { return runnable_gemm_bf16_paths() & path_bit(p); }
constexpr bool kCudaBuild =
#ifdef KOKKOS_ENABLE_CUDA
    true;
#else
    false;
#endif
}  // namespace

TEST(KernelChoice, AutoResolvesToWhatThisBuildAndCpuRun) {
  for (const Precision p : {Precision::float64, Precision::float32, Precision::bf16}) {
    const auto r = resolve_kernel_choice(autos(), p, 64);
    const KernelChoice& c = r.choice;
    EXPECT_EQ(c.variant, KernelVariant::optimized);
    EXPECT_NE(c.attention, AttentionKernel::automatic);
    EXPECT_NE(c.gemm_bf16, GemmPath::automatic);
    EXPECT_TRUE(runnable_gemm_fp32_paths() & path_bit(c.gemm_fp32)) << name_of(c.gemm_fp32);
    if (p == Precision::float64) EXPECT_EQ(c.gemm_fp32, GemmPath::blas) << "fp64 runs have no fp32 products";
    EXPECT_TRUE(runnable(c.gemm_bf16)) << name_of(c.gemm_bf16);
    EXPECT_EQ(kernel_choice_refusal(c, p, 64), "") << "a resolved choice runs";
    EXPECT_FALSE(r.gemm_bf16_reason.empty());
    // The tensor cores only for bf16 on CUDA builds (tf32 only when asked).
    EXPECT_EQ(c.attention == AttentionKernel::tensor_core, kCudaBuild && p == Precision::bf16) << name_of(p);
    if (kCudaBuild) EXPECT_EQ(c.gemm_bf16, GemmPath::cublas);
  }
  // A host run measures its paths where the build and CPU give a choice, and keeps the fastest,
  // a later path (EnumNames order) displacing an earlier one only when faster by the margin.
  if (!kCudaBuild) {
    for (const Precision p : {Precision::bf16, Precision::float32}) {
      const bool bf = p == Precision::bf16;
      const GemmPaths paths = bf ? runnable_gemm_bf16_paths() : runnable_gemm_fp32_paths();
      const auto r = resolve_kernel_choice(autos(), p, 64);
      const auto& rates = bf ? r.gemm_bf16_gflops : r.gemm_fp32_gflops;
      const GemmPath chosen = bf ? r.choice.gemm_bf16 : r.choice.gemm_fp32;
      std::size_t n = 0;
      for (const auto& [path, name] : EnumNames<GemmPath>::table) n += (paths & path_bit(path)) ? 1 : 0;
      if (n < 2) continue;  // nothing to measure
      ASSERT_EQ(rates.size(), n) << name_of(p);
      std::string expected;
      for (const auto& [path, name] : EnumNames<GemmPath>::table) {
        if (!rates.count(name)) continue;
        EXPECT_GT(rates.at(name), 0.0) << name;
        if (expected.empty() || rates.at(name) > kGemmPathMargin * rates.at(expected)) expected = name;
      }
      EXPECT_EQ(name_of(chosen), expected) << name_of(p);
      for (const auto& [name, gflops] : rates)
        EXPECT_LE(gflops, kGemmPathMargin * rates.at(name_of(chosen))) << name << " was clearly faster than the path chosen";
      EXPECT_EQ(bf ? r.gemm_bf16_reason : r.gemm_fp32_reason, "measured");
    }
  }
  // Ranks that cannot all run a path: the choice keeps to what they share.
  if (!kCudaBuild) {
    const auto r = resolve_kernel_choice(autos(), Precision::bf16, 64, path_bit(GemmPath::fp32_tiles));
    EXPECT_EQ(r.choice.gemm_bf16, GemmPath::fp32_tiles);
    EXPECT_TRUE(r.gemm_bf16_gflops.empty()) << "nothing to measure";
  }
  // A run smaller than the measurement is not measured: the first runnable path (EnumNames order).
  if (!kCudaBuild) {
    for (const Precision p : {Precision::bf16, Precision::float32}) {
      const bool bf = p == Precision::bf16;
      const GemmPaths paths = bf ? runnable_gemm_bf16_paths() & ~path_bit(GemmPath::cublas) : runnable_gemm_fp32_paths();
      if (__builtin_popcount(paths) < 2) continue;
      const double probe = __builtin_popcount(paths) * kernels::kProbeGemmFlops;
      const auto small = resolve_kernel_choice(autos(), p, 64, runnable_gemm_bf16_paths(), runnable_gemm_fp32_paths(),
                                               0.99 * probe);
      GemmPath first = GemmPath::automatic;
      for (const auto& [path, name] : EnumNames<GemmPath>::table)
        if (first == GemmPath::automatic && (paths & path_bit(path))) first = path;
      EXPECT_EQ(bf ? small.choice.gemm_bf16 : small.choice.gemm_fp32, first) << name_of(p);
      EXPECT_TRUE((bf ? small.gemm_bf16_gflops : small.gemm_fp32_gflops).empty()) << name_of(p) << ": measured";
      EXPECT_NE((bf ? small.gemm_bf16_reason : small.gemm_fp32_reason).find("not measured"), std::string::npos);
      const auto large = resolve_kernel_choice(autos(), p, 64, runnable_gemm_bf16_paths(), runnable_gemm_fp32_paths(),
                                               1.01 * probe);
      EXPECT_EQ(bf ? large.gemm_bf16_reason : large.gemm_fp32_reason, "measured") << name_of(p);
    }
  }
}

TEST(KernelChoice, WhatIsAskedIsKeptOrRefusedNamingItsKey) {
  KernelChoice ask = autos();
  ask.variant = KernelVariant::reference;
  ask.gemm_bf16 = GemmPath::fp32_tiles;
  ask.attention = AttentionKernel::portable;
  const auto r = resolve_kernel_choice(ask, Precision::bf16, 64);
  EXPECT_EQ(r.choice.variant, KernelVariant::reference);
  EXPECT_EQ(r.choice.gemm_bf16, GemmPath::fp32_tiles);
  EXPECT_EQ(r.choice.attention, AttentionKernel::portable);
  EXPECT_EQ(r.gemm_bf16_reason, "asked (run.gemm_bf16)");

  KernelChoice fp32_odd = autos();
  fp32_odd.gemm_fp32 = GemmPath::avx512_bf16;  // a bf16 path
  EXPECT_NE(kernel_choice_refusal(fp32_odd, Precision::float32, 64).find("run.gemm_fp32: avx512_bf16 is not a path"),
            std::string::npos);
  KernelChoice tc = autos();
  tc.attention = AttentionKernel::tensor_core;
  EXPECT_NE(kernel_choice_refusal(tc, Precision::float64, 64).find("run.attention_kernel: tensor_core"),
            std::string::npos) << "no fp64 tensor cores";
  EXPECT_NE(kernel_choice_refusal(tc, Precision::bf16, 24), "") << "no kernel for head dim 24";
  if (!kCudaBuild) {
    EXPECT_NE(kernel_choice_refusal(tc, Precision::bf16, 64).find("CUDA build"), std::string::npos);
    KernelChoice cublas = autos();
    cublas.gemm_bf16 = GemmPath::cublas;
    EXPECT_NE(kernel_choice_refusal(cublas, Precision::bf16, 64).find("run.gemm_bf16: cublas needs a CUDA build"),
              std::string::npos);
  }
  KernelChoice dot = autos();
  dot.gemm_bf16 = GemmPath::avx512_bf16;
  EXPECT_EQ(kernel_choice_refusal(dot, Precision::bf16, 64).empty(), runnable(GemmPath::avx512_bf16));
  KernelChoice onednn = autos();
  onednn.gemm_bf16 = GemmPath::onednn;
  onednn.gemm_fp32 = GemmPath::onednn;
  EXPECT_EQ(kernel_choice_refusal(onednn, Precision::bf16, 64).empty(), kernels::onednn_bf16_available() && !kCudaBuild);
  if (!kernels::onednn_bf16_available())
    EXPECT_NE(kernel_choice_refusal(onednn, Precision::bf16, 64).find("needs a host build with oneDNN"), std::string::npos);
}

TEST(KernelChoice, RecordedNames) {
  KernelChoice c;
  c.gemm_bf16 = GemmPath::avx512_bf16;
  EXPECT_EQ(describe(c), "variant=optimized attention=portable gemm_bf16=avx512_bf16 gemm_fp32=blas");
  EXPECT_EQ(attention_kernel_name(c, Precision::bf16), "portable");
  c.attention = AttentionKernel::tensor_core;
  EXPECT_EQ(attention_kernel_name(c, Precision::bf16), "tensor_core_bf16");
  EXPECT_EQ(attention_kernel_name(c, Precision::float32), "tensor_core_tf32");
  c.variant = KernelVariant::reference;
  EXPECT_EQ(attention_kernel_name(c, Precision::bf16), "reference");
}

TEST(KernelChoice, AKernelGivenAnUnresolvedChoiceRefusesToRun) {
  Mat<bf16> a("a", 4, 4), b("b", 4, 4), c("c", 4, 4);
  KernelChoice unresolved;
  unresolved.gemm_bf16 = GemmPath::automatic;
  EXPECT_THROW(kernels::gemm(unresolved, kernels::Op::N, kernels::Op::N, bf16(1.0f), a, b, bf16(0.0f), c),
               std::logic_error);
  Mat<float> x("x", 4, 4), y("y", 4, 4), z("z", 4, 4);
  KernelChoice fp32_unresolved;
  fp32_unresolved.gemm_fp32 = GemmPath::automatic;
  EXPECT_THROW(kernels::gemm(fp32_unresolved, kernels::Op::N, kernels::Op::N, 1.0f, x, y, 0.0f, z), std::logic_error);
}
