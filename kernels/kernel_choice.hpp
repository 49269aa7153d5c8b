// Which implementation runs each kernel: one value per run (KernelChoice), resolved
// once from the deck, the build and the machine (src/core/kernel_choice.hpp: the
// deck's `auto`s replaced by what this build and CPU or GPU run best, every rank
// agreeing) and passed to every kernel call (kernels/select.hpp), like any other
// argument. Nothing else chooses: no process setting, no environment variable.
//   variant    run.kernels: optimized (kernels/<name>.hpp), or reference (the plain
//              loops beside them, kernels/<name>_reference.hpp: slow, for checking)
//   attention  run.attention_kernel: the optimized attention's implementation
//                portable     the Kokkos team kernel (kernels/attention.hpp), every backend
//                tensor_core  the CUDA kernels (kernels/attention_tensor_core.hpp): bf16
//                             operands, or tf32 operands for fp32 runs
//                onednn       bf16 on hosts with oneDNN: the flash tiles multiplied by oneDNN,
//                             on AMX where the CPU has it (kernels/attention_onednn.hpp)
//   gemm_bf16  run.gemm_bf16: the path of products with bf16 operands (fp32 accumulation)
//                fp32_tiles   tiles converted to fp32 and multiplied by the BLAS (kernels/gemm_tiles.hpp)
//                avx512_bf16  miniLST's AVX512_BF16 kernel (kernels/gemm_bf16_dot.hpp)
//                onednn       oneDNN's matmul: AMX tiles where the CPU has them (kernels/gemm_onednn.hpp)
//                cublas       cuBLAS's mixed-precision GEMM (kernels/gemm_bf16_cublas.hpp)
//   gemm_fp32  run.gemm_fp32: the path of fp32 products
//                blas         the BLAS behind Kokkos Kernels (OpenBLAS, cuBLAS)
//                onednn       oneDNN's fp32 matmul
// fp64 products always go to the BLAS. A deck's `auto` (automatic) never reaches a
// kernel: the resolver replaces it (a kernel given one throws). A KernelChoice{} runs
// on every build without measuring anything: the portable attention, bf16 products
// through fp32 tiles (cuBLAS on CUDA builds), fp32 products through the BLAS.
// Adding a path or an attention kernel: its enumerator here and its name beside the
// others (src/core/kernel_choice.hpp), its implementation file, its case in the
// dispatch (kernels/gemm.hpp or kernels/select.hpp), when it can run and whether auto
// takes it (src/core/kernel_choice.cpp), and its test (docs/architecture.md, "Where to
// change things", lists the lines).
#pragma once

#include <Kokkos_Macros.hpp>

namespace minilst {

enum class KernelVariant { optimized, reference };
enum class AttentionKernel { automatic, portable, tensor_core, onednn };
enum class GemmPath { automatic, blas, fp32_tiles, avx512_bf16, cublas, onednn };

struct KernelChoice {
  KernelVariant variant = KernelVariant::optimized;
  AttentionKernel attention = AttentionKernel::portable;
#ifdef KOKKOS_ENABLE_CUDA
  GemmPath gemm_bf16 = GemmPath::cublas;
#else
  GemmPath gemm_bf16 = GemmPath::fp32_tiles;
#endif
  GemmPath gemm_fp32 = GemmPath::blas;
  bool operator==(const KernelChoice& o) const {
    return variant == o.variant && attention == o.attention && gemm_bf16 == o.gemm_bf16 && gemm_fp32 == o.gemm_fp32;
  }
  bool operator!=(const KernelChoice& o) const { return !(*this == o); }
};

}  // namespace minilst
