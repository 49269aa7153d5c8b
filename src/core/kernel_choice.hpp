// The run's KernelChoice (kernels/kernel_choice.hpp) from what its deck asks
// (run.kernels, run.attention_kernel, run.gemm_bf16, run.gemm_fp32), the build and
// the machine: every `auto` replaced by what runs best here, a path this build or
// CPU cannot run refused with the key that asked for it.
//   attention  auto: tensor_core for bf16 on CUDA builds where the kernels run (head
//              dim, shared memory); portable otherwise (fp32 takes tf32 only when asked)
//   gemm_bf16  auto: cublas on CUDA builds; on hosts the fastest, measured now, of the
//              paths every rank can run (onednn in builds with oneDNN; avx512_bf16 where
//              the CPU has it; fp32_tiles)
//   gemm_fp32  auto: blas on CUDA builds and in fp64 runs; on hosts the faster, measured
//              now, of blas and onednn (in bf16 runs too: the fp32 tiles are fp32 products)
// Several ranks agree through the job floor (job/agreement.hpp): the intersection of
// what each can run, then rank 0's measurement. A run whose whole work (run_flops, per rank)
// is less than measuring the paths would cost is not measured: it takes the established path
// (the first runnable in EnumNames order), as no faster path could win back the probe's time.
#pragma once

#include <limits>
#include <map>
#include <string>

#include "core/config.hpp"
#include "kernels/kernel_choice.hpp"

namespace minilst {

template <>
struct EnumNames<KernelVariant> {
  static constexpr std::array<std::pair<KernelVariant, const char*>, 2> table{
      {{KernelVariant::optimized, "optimized"}, {KernelVariant::reference, "reference"}}};
};
template <>
struct EnumNames<AttentionKernel> {
  static constexpr std::array<std::pair<AttentionKernel, const char*>, 4> table{
      {{AttentionKernel::automatic, "auto"}, {AttentionKernel::portable, "portable"},
       {AttentionKernel::tensor_core, "tensor_core"}, {AttentionKernel::onednn, "onednn"}}};
};
template <>
struct EnumNames<GemmPath> {
  static constexpr std::array<std::pair<GemmPath, const char*>, 6> table{
      {{GemmPath::automatic, "auto"}, {GemmPath::blas, "blas"}, {GemmPath::fp32_tiles, "fp32_tiles"},
       {GemmPath::avx512_bf16, "avx512_bf16"}, {GemmPath::cublas, "cublas"}, {GemmPath::onednn, "onednn"}}};
};

// A set of GEMM paths (bit i: the GemmPath of value i).
using GemmPaths = unsigned;
constexpr GemmPaths path_bit(GemmPath p) { return 1u << unsigned(p); }

// The bf16 and fp32 paths this process can run (build, CPU).
GemmPaths runnable_gemm_bf16_paths();
GemmPaths runnable_gemm_fp32_paths();

// "onednn:brg:avx512_core_amx_bf16" for oneDNN (with the implementation oneDNN chose on this
// CPU), else the path's name: what the metrics file records as gemm_bf16 and gemm_fp32.
std::string gemm_path_record(GemmPath path, bool bf16);

// What the resolution found besides the choice: why each part, the rates measured.
struct ResolvedKernels {
  KernelChoice choice;
  std::string gemm_bf16_reason, gemm_fp32_reason, attention_reason;
  std::map<std::string, double> gemm_bf16_gflops, gemm_fp32_gflops;  // path -> measured GFLOP/s (probed paths only)
};

// Why `request` cannot run a `precision` run of head dim `head_dim` here ("" when it
// can), naming the deck key: a path or kernel this build, CPU or GPU lacks.
std::string kernel_choice_refusal(const KernelChoice& request, Precision precision, int head_dim);

// `auto` among GEMM paths: tried in EnumNames order, a later path displaces the best so far
// only when its probe rate exceeds the best's by this factor (src/core/kernel_choice.cpp).
constexpr double kGemmPathMargin = 1.10;

// The request with every automatic replaced (see the top of this file). bf16_allowed,
// fp32_allowed: the paths the choice may take (several ranks: what all of them can run).
// Requires kernel_choice_refusal(request, ...) == "".
ResolvedKernels resolve_kernel_choice(const KernelChoice& request, Precision precision, int head_dim,
                                      GemmPaths bf16_allowed = runnable_gemm_bf16_paths(),
                                      GemmPaths fp32_allowed = runnable_gemm_fp32_paths(),
                                      double run_flops = std::numeric_limits<double>::infinity());

// "variant=optimized attention=portable gemm_bf16=avx512_bf16 gemm_fp32=blas": what the
// log prints and the metrics file records (kernel_choice).
std::string describe(const KernelChoice& choice);

// The attention kernel as the metrics file records it (attention_kernel): reference,
// portable, tensor_core_bf16 or tensor_core_tf32.
std::string attention_kernel_name(const KernelChoice& choice, Precision precision);

}  // namespace minilst
