#include "core/kernel_choice.hpp"

#include <Kokkos_Core.hpp>

#include <type_traits>

#include "kernels/attention_tensor_core.hpp"
#include "kernels/gemm_bf16_dot.hpp"
#include "kernels/gemm_rate.hpp"

namespace minilst {

namespace {

constexpr bool kCuda =
#ifdef KOKKOS_ENABLE_CUDA
    std::is_same<MemSpace, Kokkos::CudaSpace>::value;
#else
    false;
#endif

// Why the tensor-core attention cannot run this precision and head dim ("" when it can).
std::string tensor_core_refusal(Precision precision, int head_dim) {
  switch (precision) {
    case Precision::bf16: return kernels::tensor_core_unavailable<bf16>(head_dim);
    case Precision::float32: return kernels::tensor_core_unavailable<float>(head_dim);
    case Precision::float64: break;
  }
  return kernels::tensor_core_unavailable<double>(head_dim);
}

// The paths of each kind of product, whatever the build.
constexpr GemmPaths kBf16Paths = path_bit(GemmPath::fp32_tiles) | path_bit(GemmPath::avx512_bf16) | path_bit(GemmPath::cublas);
constexpr GemmPaths kFp32Paths = path_bit(GemmPath::blas);

std::string path_names(GemmPaths paths) {
  std::string out;
  for (const auto& [p, name] : EnumNames<GemmPath>::table)
    if (paths & path_bit(p)) out += std::string(out.empty() ? "" : ", ") + name;
  return out;
}

// Why a path asked for by `key` cannot run here ("" when it can or is auto).
std::string path_refusal(const char* key, GemmPath asked, GemmPaths of_kind, GemmPaths runnable) {
  if (asked == GemmPath::automatic || (runnable & path_bit(asked))) return "";
  std::string why = std::string(key) + ": " + name_of(asked);
  if (!(of_kind & path_bit(asked))) return why + " is not a path of these products (auto, " + path_names(of_kind) + ")";
  why += asked == GemmPath::avx512_bf16 ? " needs an x86-64 CPU with AVX512_BF16 and a host build"
         : asked == GemmPath::cublas    ? " needs a CUDA build"
                                        : " cannot run in this build";
  return why + " (here: auto, " + path_names(runnable) + ")";
}

}  // namespace

GemmPaths runnable_gemm_bf16_paths() {
  if (kCuda) return path_bit(GemmPath::cublas) | path_bit(GemmPath::fp32_tiles);
  GemmPaths p = path_bit(GemmPath::fp32_tiles);
  if (kernels::cpu_has_bf16_dot()) p |= path_bit(GemmPath::avx512_bf16);
  return p;
}

GemmPaths runnable_gemm_fp32_paths() { return path_bit(GemmPath::blas); }

std::string kernel_choice_refusal(const KernelChoice& request, Precision precision, int head_dim) {
  if (request.attention == AttentionKernel::tensor_core) {
    if (const auto why = tensor_core_refusal(precision, head_dim); !why.empty())
      return "run.attention_kernel: tensor_core: " + why;
  }
  if (auto why = path_refusal("run.gemm_bf16", request.gemm_bf16, kBf16Paths, runnable_gemm_bf16_paths()); !why.empty())
    return why;
  return path_refusal("run.gemm_fp32", request.gemm_fp32, kFp32Paths, runnable_gemm_fp32_paths());
}

ResolvedKernels resolve_kernel_choice(const KernelChoice& request, Precision precision, int head_dim,
                                      GemmPaths bf16_allowed) {
  ResolvedKernels r;
  KernelChoice& c = r.choice;
  c = request;
  // Attention.
  if (c.attention == AttentionKernel::automatic) {
    const bool tc = precision == Precision::bf16 && tensor_core_refusal(precision, head_dim).empty();
    c.attention = tc ? AttentionKernel::tensor_core : AttentionKernel::portable;
    r.attention_reason = tc ? "auto: bf16 on the tensor cores"
                            : kCuda ? "auto: the tensor cores take bf16 runs (tf32 only when asked)"
                                    : "auto: the portable kernel (no tensor cores in this build)";
  } else {
    r.attention_reason = "asked (run.attention_kernel)";
  }
  // fp32 products: one path.
  if (c.gemm_fp32 == GemmPath::automatic) c.gemm_fp32 = GemmPath::blas;
  // bf16 products: the device's library, or the faster measured host path.
  if (c.gemm_bf16 != GemmPath::automatic) {
    r.gemm_bf16_reason = "asked (run.gemm_bf16)";
  } else if (kCuda) {
    c.gemm_bf16 = GemmPath::cublas;
    r.gemm_bf16_reason = "device: cublasGemmEx, fp32 compute";
  } else if (precision != Precision::bf16) {
    c.gemm_bf16 = GemmPath::fp32_tiles;
    r.gemm_bf16_reason = "not used: no bf16 products in a " + name_of(precision) + " run";
  } else if (!(bf16_allowed & path_bit(GemmPath::avx512_bf16))) {
    c.gemm_bf16 = GemmPath::fp32_tiles;
    r.gemm_bf16_reason = kernels::cpu_has_bf16_dot() ? "a rank's CPU has no bf16 dot-product instructions"
                                                     : "no bf16 dot-product instructions on this CPU";
  } else {
    for (const GemmPath p : {GemmPath::avx512_bf16, GemmPath::fp32_tiles})
      r.gemm_bf16_gflops[name_of(p)] = kernels::bf16_path_gflops(p);
    const bool dot = r.gemm_bf16_gflops["avx512_bf16"] >= r.gemm_bf16_gflops["fp32_tiles"];
    c.gemm_bf16 = dot ? GemmPath::avx512_bf16 : GemmPath::fp32_tiles;
    r.gemm_bf16_reason = "measured";
  }
  return r;
}

std::string describe(const KernelChoice& c) {
  return "variant=" + name_of(c.variant) + " attention=" + name_of(c.attention) + " gemm_bf16=" + name_of(c.gemm_bf16) +
         " gemm_fp32=" + name_of(c.gemm_fp32);
}

std::string attention_kernel_name(const KernelChoice& c, Precision precision) {
  if (c.variant == KernelVariant::reference) return "reference";
  if (c.attention != AttentionKernel::tensor_core) return name_of(c.attention);
  return precision == Precision::bf16 ? "tensor_core_bf16" : "tensor_core_tf32";
}

}  // namespace minilst
