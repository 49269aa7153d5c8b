#include "core/kernel_choice.hpp"

#include <Kokkos_Core.hpp>

#include <cstdio>
#include <type_traits>

#include "kernels/attention_onednn.hpp"
#include "kernels/attention_tensor_core.hpp"
#include "kernels/gemm_bf16_dot.hpp"
#include "kernels/gemm_onednn.hpp"
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
constexpr GemmPaths kBf16Paths = path_bit(GemmPath::fp32_tiles) | path_bit(GemmPath::avx512_bf16) |
                                 path_bit(GemmPath::cublas) | path_bit(GemmPath::onednn);
constexpr GemmPaths kFp32Paths = path_bit(GemmPath::blas) | path_bit(GemmPath::onednn);

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
         : asked == GemmPath::onednn    ? " needs a host build with oneDNN (libdnnl-dev; MINILST_ENABLE_ONEDNN), "
                                          "for bf16 on a CPU with AVX-512 or later"
                                        : " cannot run in this build";
  return why + " (here: auto, " + path_names(runnable) + ")";
}

}  // namespace

GemmPaths runnable_gemm_bf16_paths() {
  if (kCuda) return path_bit(GemmPath::cublas) | path_bit(GemmPath::fp32_tiles);
  GemmPaths p = path_bit(GemmPath::fp32_tiles);
  if (kernels::cpu_has_bf16_dot()) p |= path_bit(GemmPath::avx512_bf16);
  if (kernels::onednn_bf16_available()) p |= path_bit(GemmPath::onednn);
  return p;
}

GemmPaths runnable_gemm_fp32_paths() {
  GemmPaths p = path_bit(GemmPath::blas);
  if (!kCuda && kernels::onednn_available()) p |= path_bit(GemmPath::onednn);
  return p;
}

std::string gemm_path_record(GemmPath path, bool bf16) {
  if (path != GemmPath::onednn) return name_of(path);
  return "onednn:" + kernels::onednn_implementation(bf16);
}

std::string kernel_choice_refusal(const KernelChoice& request, Precision precision, int head_dim) {
  if (request.attention == AttentionKernel::tensor_core) {
    if (const auto why = tensor_core_refusal(precision, head_dim); !why.empty())
      return "run.attention_kernel: tensor_core: " + why;
  }
  if (request.attention == AttentionKernel::onednn) {
    if (kCuda || !kernels::attention_onednn_available())
      return "run.attention_kernel: onednn needs a host build with oneDNN (libdnnl-dev; MINILST_ENABLE_ONEDNN) "
             "on a CPU where oneDNN multiplies bf16 (AVX-512 or later)";
    if (precision != Precision::bf16) return "run.attention_kernel: onednn multiplies bf16 tiles: run.precision bf16";
  }
  if (auto why = path_refusal("run.gemm_bf16", request.gemm_bf16, kBf16Paths, runnable_gemm_bf16_paths()); !why.empty())
    return why;
  return path_refusal("run.gemm_fp32", request.gemm_fp32, kFp32Paths, runnable_gemm_fp32_paths());
}

namespace {
// The fastest of `candidates` on the probe product in T, each tried as `base`'s bf16 or fp32
// path; their rates into `rates`. Paths are tried in EnumNames order (blas, fp32_tiles,
// avx512_bf16, onednn: the longer-standing first), and a later one displaces the best so far
// only when it is faster by more than kGemmPathMargin: within the probe's noise (and a probe product
// is not the step's: measured in-step, oneDNN's fp32 matmul ran 0.6-0.9x its probe rate where
// the BLAS held its own) the established path stays.
template <class T>
GemmPath fastest(KernelChoice base, GemmPaths candidates, bool bf16, std::map<std::string, double>& rates) {
  GemmPath best = GemmPath::automatic;
  for (const auto& [path, name] : EnumNames<GemmPath>::table) {
    if (!(candidates & path_bit(path))) continue;
    (bf16 ? base.gemm_bf16 : base.gemm_fp32) = path;
    rates[name] = kernels::probe_gemm_gflops<T>(base);
    if (best == GemmPath::automatic || rates[name] > kGemmPathMargin * rates[name_of(best)]) best = path;
  }
  return best;
}

// A GEMM path where the request says auto: the one path allowed, else the fastest measured.
std::string gflop_text(double flops) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g GFLOP", flops / 1e9);
  return b;
}

template <class T>
GemmPath resolve_path(const KernelChoice& base, GemmPaths allowed, bool bf16, double run_flops,
                      std::map<std::string, double>& rates, std::string& reason) {
  const int paths = __builtin_popcount(allowed);
  const double probe_flops = paths * kernels::kProbeGemmFlops;
  if (paths == 1 || run_flops < probe_flops) {
    reason = paths == 1 ? "the one path every rank can run"
                        : "not measured: the run computes " + gflop_text(run_flops) + " per rank, measuring " +
                              std::to_string(paths) + " paths " + gflop_text(probe_flops) + "; the established path";
    for (const auto& [path, name] : EnumNames<GemmPath>::table)
      if (allowed & path_bit(path)) return path;
  }
  reason = "measured";
  return fastest<T>(base, allowed, bf16, rates);
}
}  // namespace

ResolvedKernels resolve_kernel_choice(const KernelChoice& request, Precision precision, int head_dim,
                                      GemmPaths bf16_allowed, GemmPaths fp32_allowed, double run_flops) {
  ResolvedKernels r;
  KernelChoice& c = r.choice;
  c = request;
  // Attention.
  if (c.attention == AttentionKernel::automatic) {
    const bool bf = precision == Precision::bf16;
    const bool tc = bf && tensor_core_refusal(precision, head_dim).empty();
    const bool amx = bf && !kCuda && kernels::attention_onednn_available() && kernels::cpu_matrix_isa() == "amx_bf16";
    c.attention = tc ? AttentionKernel::tensor_core : amx ? AttentionKernel::onednn : AttentionKernel::portable;
    r.attention_reason = tc    ? "auto: bf16 on the tensor cores"
                         : amx ? "auto: bf16 tiles on the CPU's AMX unit (oneDNN)"
                         : kCuda ? "auto: the tensor cores take bf16 runs (tf32 only when asked)"
                                 : "auto: the portable kernel";
  } else {
    r.attention_reason = "asked (run.attention_kernel)";
  }
  // fp32 products (and bf16's fp32 tiles): measured on hosts where there is a choice.
  if (c.gemm_fp32 != GemmPath::automatic) {
    r.gemm_fp32_reason = "asked (run.gemm_fp32)";
  } else if (kCuda || precision == Precision::float64) {
    c.gemm_fp32 = GemmPath::blas;
    r.gemm_fp32_reason = kCuda ? "device: the BLAS (cuBLAS)" : "the BLAS (no fp32 products in a double run)";
  } else {
    c.gemm_fp32 = resolve_path<float>(c, fp32_allowed & kFp32Paths, false, run_flops, r.gemm_fp32_gflops, r.gemm_fp32_reason);
  }
  // bf16 products: the device's library, or the fastest measured host path.
  if (c.gemm_bf16 != GemmPath::automatic) {
    r.gemm_bf16_reason = "asked (run.gemm_bf16)";
  } else if (kCuda) {
    c.gemm_bf16 = GemmPath::cublas;
    r.gemm_bf16_reason = "device: cublasGemmEx, fp32 compute";
  } else if (precision != Precision::bf16) {
    c.gemm_bf16 = GemmPath::fp32_tiles;
    r.gemm_bf16_reason = "not used: no bf16 products in a " + name_of(precision) + " run";
  } else {
    c.gemm_bf16 = resolve_path<bf16>(c, bf16_allowed & kBf16Paths & ~path_bit(GemmPath::cublas), true, run_flops,
                                     r.gemm_bf16_gflops, r.gemm_bf16_reason);
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
