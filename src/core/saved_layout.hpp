// The layout in which an attention strategy's backward reads q, k, v and o
// (attention/attention_strategy.hpp), and so the shapes the activation store
// keeps them in (memory/activation_store.hpp).
//   local: the layer's own tensors, q, o [S, H h] and k, v [S, G h] on the S local
//          tokens (a token's row can be recomputed from that token alone);
//   else:  the strategy's copies (Ulysses: [S_group, heads here h]), kept beside
//          the layer's o, which the output projection's backward reads.
#pragma once

#include "kernels/types.hpp"

namespace minilst {

struct SavedLayout {
  Extent2 q, kv;  // q and o; k and v
  bool local = true;
};

}  // namespace minilst
