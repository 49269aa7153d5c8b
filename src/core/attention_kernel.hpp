// The attention kernel a run uses, from what its deck says: run.attention_kernel,
// run.kernels, run.precision and the head dim (kernels/attention_tensor_core.hpp
// decides for a scalar type; this answers for a deck).
#pragma once

#include <string>

#include "core/config.hpp"
#include "kernels/attention_tensor_core.hpp"

namespace minilst {

// f(T{}) for the run's scalar type.
template <class F>
auto for_precision(Precision p, F&& f) {
  switch (p) {
    case Precision::float64: return f(double{});
    case Precision::bf16: return f(bf16{});
    case Precision::float32: break;
  }
  return f(float{});
}

// The name the metrics file records (attention_kernel): reference, portable,
// tensor_core_bf16 or tensor_core_tf32. Reads the process's setting.
inline std::string attention_kernel_ran(const ModelConfig& model, Precision precision, KernelVariant variant) {
  return for_precision(precision, [&](auto t) {
    return kernels::attention_kernel_name<decltype(t)>(variant, model.head_dim());
  });
}

// Why a deck asking for the tensor cores cannot have them here ("" when it can,
// or when it does not ask).
inline std::string attention_kernel_refusal(const ModelConfig& model, Precision precision, AttentionKernel asked) {
  if (asked != AttentionKernel::tensor_core) return "";
  const std::string why = for_precision(precision, [&](auto t) {
    return kernels::tensor_core_unavailable<decltype(t)>(model.head_dim());
  });
  return why.empty() ? "" : "run.attention_kernel: tensor_core: " + why;
}

}  // namespace minilst
