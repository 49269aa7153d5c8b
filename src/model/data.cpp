#include "model/data.hpp"

#include <algorithm>
#include <numeric>
#include <random>

#include "kernels/types.hpp"

namespace minilst {

Batch synthetic_batch(int vocab, std::int64_t seq_len, std::uint64_t seed, long step, int micro,
                      const std::vector<std::int64_t>& doc_starts) {
  std::vector<std::int64_t> next(vocab);
  std::iota(next.begin(), next.end(), 0);
  std::mt19937_64 language(seed);  // the language is the same for every step
  std::shuffle(next.begin(), next.end(), language);

  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + std::uint64_t(step) * 1000003ull + std::uint64_t(micro) + 1);
  std::uniform_int_distribution<std::int64_t> uniform(0, vocab - 1);
  std::bernoulli_distribution follow(0.75);
  Batch b;
  b.tokens.resize(seq_len);
  b.tokens[0] = uniform(rng);
  for (std::int64_t i = 1; i < seq_len; ++i) b.tokens[i] = follow(rng) ? next[b.tokens[i - 1]] : uniform(rng);
  b.labels.assign(seq_len, kIgnoreLabel);
  for (std::int64_t i = 0; i + 1 < seq_len; ++i) b.labels[i] = b.tokens[i + 1];
  for (const std::int64_t start : doc_starts)  // a document's last token predicts nothing of the next
    if (start > 0 && start <= seq_len) b.labels[start - 1] = kIgnoreLabel;
  b.n_valid = std::count_if(b.labels.begin(), b.labels.end(), [](std::int64_t l) { return l != kIgnoreLabel; });
  return b;
}

}  // namespace minilst
