#include "memory/offload_alpha.hpp"

#include <algorithm>
#include <cmath>

namespace minilst {

double alpha_for_time(const AlphaInputs& in) {
  if (in.bandwidth <= 0 || in.layer_seconds <= 0) return 1.0;
  if (in.bytes_rest <= 0) return 1.0;
  const double a = (in.bandwidth * in.layer_seconds - in.bytes_x - in.bytes_o) / in.bytes_rest;
  return std::clamp(a, 0.0, 1.0);
}

double allowed_alpha(double bound, AlphaValues values) {
  bound = std::clamp(bound, 0.0, 1.0);
  if (values == AlphaValues::continuous) return bound;
  double best = 0.0;
  for (const double v : kMemoAlphas)
    if (v <= bound * (1 + 1e-12)) best = v;  // (a bound computed as v exactly may round below it)
  return best;
}

double solve_alpha(const AlphaInputs& in, AlphaValues values) {
  return allowed_alpha(std::min(alpha_for_time(in), in.host_alpha_max), values);
}

}  // namespace minilst
