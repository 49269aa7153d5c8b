#include "memory/offload_alpha.hpp"

#include <algorithm>
#include <cmath>

#include "model/memory_model.hpp"

namespace minilst {

double alpha_for_time(const AlphaInputs& in) {
  if (in.bandwidth <= 0 || in.layer_seconds <= 0) return 1.0;
  if (in.bytes_rest <= 0) return 1.0;
  const double a = (in.bandwidth * in.layer_seconds - in.bytes_x - in.bytes_o) / in.bytes_rest;
  return std::clamp(a, 0.0, 1.0);
}

double solve_alpha(const AlphaInputs& in) {
  return std::clamp(std::min(alpha_for_time(in), in.host_alpha_max), 0.0, 1.0);
}

double host_alpha_max(const ModelConfig& cfg, MemoryPolicy policy, std::int64_t S, std::size_t T, std::size_t A,
                      double budget) {
  const double at0 = double(predict_host_offload(cfg, policy, 0.0, S, T, A));
  if (at0 > budget) return -1.0;
  const double at1 = double(predict_host_offload(cfg, policy, 1.0, S, T, A));
  if (at1 <= budget || at1 == at0) return 1.0;
  // host(alpha) grows by (at1 - at0) / S per token row: the most rows that fit
  const double per_row = (at1 - at0) / double(S);
  const double rows = std::floor((budget - at0) / per_row);
  return std::clamp(rows / double(S), 0.0, 1.0);
}

}  // namespace minilst
