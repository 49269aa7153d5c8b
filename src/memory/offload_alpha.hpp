// MEMO's token fraction alpha (memory.offload_alpha: auto): the largest alpha in
// [0, 1] such that
//   (bytes_x + bytes_o + alpha bytes_rest) / B <= T_layer   (one layer's copy hides
//                                                            behind one layer's compute)
//   host(alpha) <= host budget                               (every offloaded layer fits)
// B: the copy engine's bandwidth, T_layer: one layer's forward compute time, both
// measured in the warm-up step; bytes_o is the tensors that always move whole at
// alpha > 0 (o, the lse rows; Ulysses' head-sharded q, k, v, o), bytes_rest the row
// tensors of all tokens (q, k, v, y; the MLP's when it runs as one chunk); host(alpha)
// is the store's host footprint (ActivationStore::host_bytes; the bound is solved in
// offload_controller.hpp).
// Which alphas auto may choose (memory.offload_alpha_values): `continuous`, any
// multiple of 1/S; `memo`, MEMO's own set {0, 1/8, 1/4, 1/2, 1} (MEMO searches alpha
// among these together with its parallel strategy), the largest that satisfies both.
#pragma once

#include <array>

#include "core/names.hpp"

namespace minilst {

enum class AlphaValues { continuous, memo };
template <>
struct EnumNames<AlphaValues> {
  static constexpr std::array<std::pair<AlphaValues, const char*>, 2> table{
      {{AlphaValues::continuous, "continuous"}, {AlphaValues::memo, "memo"}}};
};
constexpr std::array<double, 5> kMemoAlphas = {0.0, 0.125, 0.25, 0.5, 1.0};

struct AlphaInputs {
  double bytes_x = 0, bytes_o = 0, bytes_rest = 0;  // one layer
  double bandwidth = 0;                             // B, bytes/s (0: nothing measured)
  double layer_seconds = 0;                         // T_layer
  double host_alpha_max = 1;                        // the host budget's bound
};

// The time bound alone: (B T_layer - bytes_x - bytes_o) / bytes_rest, clamped to [0, 1]
// (1 when nothing was measured: no copy, no constraint).
double alpha_for_time(const AlphaInputs& in);
// The largest alpha of `values` that is at most `bound` (bound in [0, 1]).
double allowed_alpha(double bound, AlphaValues values);
// min(time bound, host bound), in [0, 1], taken down to `values`.
double solve_alpha(const AlphaInputs& in, AlphaValues values = AlphaValues::continuous);

}  // namespace minilst
