// Synthetic training data: a noisy bigram language, so the loss has something
// to learn (it falls from ln V toward the noise entropy) and every run is
// reproducible from the seed. A fixed random permutation `next` of the vocab
// gives token[i+1] = next[token[i]] with probability 3/4, else a uniform token.
// Labels are shifted on the *global* sequence, before any sharding:
//   label[i] = token[i+1], label[S-1] = -100 (ignored).
#pragma once

#include <cstdint>
#include <vector>

namespace minilst {

struct Batch {
  std::vector<std::int64_t> tokens;  // [S] global order
  std::vector<std::int64_t> labels;  // [S]
  std::int64_t n_valid = 0;          // labels != -100
};

// The sequence of micro-step `micro` of step `step` (steps count from 0).
Batch synthetic_batch(int vocab, std::int64_t seq_len, std::uint64_t seed, long step, int micro);

}  // namespace minilst
