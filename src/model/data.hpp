// Synthetic training data: a noisy bigram language, so the loss has something
// to learn (it falls from ln V toward the noise entropy) and every run is
// reproducible from the seed. A fixed random permutation `next` of the vocab
// gives token[i+1] = next[token[i]] with probability 3/4, else a uniform token.
// Labels are shifted on the *global* sequence, before any sharding:
//   label[i] = token[i+1], label[S-1] = -100 (ignored); with packed documents (their
//   starts after 0, SequenceMask::doc_starts) a document's last token is ignored too: the
//   loss counts only the tokens whose next token is in their own document.
#pragma once

#include <cstdint>
#include <vector>

#include "core/batch.hpp"

namespace minilst {

// The sequence of micro-step `micro` of step `step` (steps count from 0).
Batch synthetic_batch(int vocab, std::int64_t seq_len, std::uint64_t seed, long step, int micro,
                      const std::vector<std::int64_t>& doc_starts = {});

}  // namespace minilst
