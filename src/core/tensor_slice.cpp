#include "core/tensor_slice.hpp"

#include <stdexcept>

namespace minilst {

std::string check_tensor_slice(const ModelConfig& m, int T) {
  const auto n = [](long long x) { return std::to_string(x); };
  const std::string tp = "parallel.tensor (" + n(T) + ")";
  if (T < 1) return tp + " must be at least 1";
  if (m.heads % T != 0) return "model.heads (" + n(m.heads) + ") is not divisible by " + tp;
  if (m.kv_heads % T != 0 && T % m.kv_heads != 0)
    return "model.kv_heads (" + n(m.kv_heads) + ") and " + tp +
           ": the kv heads must be a multiple of the tensor-parallel degree, or divide it (then they are replicated)";
  if (m.intermediate % T != 0) return "model.intermediate (" + n(m.intermediate) + ") is not divisible by " + tp;
  if (m.vocab % T != 0) return "model.vocab (" + n(m.vocab) + ") is not divisible by " + tp;
  return "";
}

TensorSlice tensor_slice(const ModelConfig& m, int T, int t) {
  if (!check_tensor_slice(m, T).empty() || t < 0 || t >= T)
    throw std::logic_error("tensor_slice: rank " + std::to_string(t) + " of " + std::to_string(T) + ": " +
                           check_tensor_slice(m, T));
  TensorSlice s;
  s.ranks = T;
  s.rank = t;
  s.q_heads = m.heads / T;
  s.q_head0 = t * s.q_heads;
  if (m.kv_heads % T == 0) {
    s.kv_heads = m.kv_heads / T;
    s.kv_head0 = t * s.kv_heads;
  } else {  // G divides T: the one kv head of this rank's query group
    s.kv_heads = 1;
    s.kv_copies = T / m.kv_heads;
    s.kv_head0 = t / s.kv_copies;
  }
  s.intermediate = m.intermediate / T;
  s.intermediate0 = t * s.intermediate;
  s.vocab = m.vocab / T;
  s.vocab0 = t * s.vocab;
  return s;
}

ModelConfig local_model(const ModelConfig& m, const TensorSlice& s) {
  ModelConfig local = m;
  local.head_dim_override = m.head_dim();
  local.heads = s.q_heads;
  local.kv_heads = s.kv_heads;
  local.intermediate = s.intermediate;
  local.vocab = s.vocab;
  return local;
}

}  // namespace minilst
