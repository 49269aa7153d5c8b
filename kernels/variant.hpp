// Which implementation of the kernels a run uses, chosen at run time.
// run.kernels:
//   optimized  the tiled, vectorised kernels (kernels/<name>.hpp)
//   reference  the plain loops beside them (kernels/<name>_reference.hpp): the
//              obvious code for each formula, slow, for checking the optimised ones
// run.attention_kernel (the optimised attention only):
//   auto         the tensor-core kernels on CUDA builds for bf16 (and a head dim
//                they are built for), the portable Kokkos kernel otherwise
//   portable     the Kokkos team kernel (kernels/attention.hpp), on every backend
//   tensor_core  the CUDA kernels (kernels/attention_tensor_core.hpp): bf16 operands,
//                or tf32 operands for fp32 runs; refused where they cannot run
// Tests hold the variants equal; the metrics file records which ran
// (kernel_variant, attention_kernel).
#pragma once

namespace minilst {

enum class KernelVariant { optimized, reference };

enum class AttentionKernel { automatic, portable, tensor_core };

}  // namespace minilst
