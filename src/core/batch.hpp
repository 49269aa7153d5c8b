// One micro-step's sequence: tokens and their labels, in global order (or a
// rank's shard of them, in local order).
#pragma once

#include <cstdint>
#include <vector>

namespace minilst {

struct Batch {
  std::vector<std::int64_t> tokens;  // [S]
  std::vector<std::int64_t> labels;  // [S], label[i] = token[i+1] of the global sequence
  std::int64_t n_valid = 0;          // labels != kIgnoreLabel (kernels/types.hpp) in the *global* sequence
};

}  // namespace minilst
