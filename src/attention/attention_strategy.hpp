// How a layer's core attention is made whole. The layer hands over its local
// q, k, v (after RoPE) and gets o back; it does not know whether the other
// tokens live on this rank (LocalAttention), arrive by all-to-all (Ulysses) or
// travel around a ring. What the backward needs beyond q, k, v, o (the
// log-sum-exp rows, or RSA's softmax probabilities: the "statistics") is written by forward into a buffer the
// caller provides in the shape the strategy names (stats_shape): the activation
// store keeps it with the layer's other saved tensors.
// Where the backward reads q, k, v and o is the strategy's choice too
// (saved_layout): the layer's own, local [S, H h] / [S, G h] tensors for strategies
// that attend on the local tokens (local, ring); a strategy that attends in another
// layout (Ulysses: the group's tokens, this member's heads) keeps copies in that
// layout, which forward writes into `kept`, so that its backward fetches nothing
// but dO (DeepSpeed-Ulysses' and ALST's four all-to-alls per layer backward).
//   S local tokens, H query heads, G kv heads, h head dim.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>

#include "core/batch.hpp"
#include "core/saved_layout.hpp"
#include "kernels/types.hpp"
#include "memory/tracker.hpp"

namespace minilst {

// Where forward leaves what backward reads (the layer's own views in a local layout).
template <class T>
struct AttentionKept {
  Mat<T> q, k, v, o;
};

template <class T>
class AttentionStrategy {
 public:
  using A = accum_t<T>;
  virtual ~AttentionStrategy() = default;
  // Shape of the statistics forward saves for q of `rows` local tokens and `heads` query heads.
  virtual Extent2 stats_shape(std::int64_t rows, std::int64_t heads) const = 0;
  // The layout backward reads q, k, v, o in, for `rows` local tokens of q_cols / kv_cols columns.
  virtual SavedLayout saved_layout(std::int64_t rows, std::int64_t q_cols, std::int64_t kv_cols) const {
    return {{rows, q_cols}, {rows, kv_cols}, true};
  }
  // o: [S, H*h] (=), stats: stats_shape(S, H) (=); q, k, v: the layer's [S, *];
  // kept: saved_layout's q, k, v, o (=), the layer's q, k, v, o when local.
  virtual void forward(const Mat<T>& o, const Mat<A>& stats, const Mat<const T>& q, const Mat<const T>& k,
                       const Mat<const T>& v, const AttentionKept<T>& kept) = 0;
  // The same in two steps, for strategies whose saved layout is not local: the layer
  // hands over q (input 0), k (1), v (2) one at a time as it projects them, each
  // written into kept's (so one local tensor lives at a time), then forward_kept
  // attends on what is kept. Local layouts use forward alone.
  virtual void keep_input(int input, const Mat<const T>& x, const AttentionKept<T>& kept) {
    (void)input, (void)x, (void)kept;
    throw std::logic_error("attention: keep_input of a strategy that reads the layer's own q, k, v");
  }
  virtual void forward_kept(const Mat<T>& o, const Mat<A>& stats, const AttentionKept<T>& kept) {
    (void)o, (void)stats, (void)kept;
    throw std::logic_error("attention: forward_kept of a strategy that reads the layer's own q, k, v");
  }
  // Whether backward adds dk, dv into what they hold (on) rather than overwriting them:
  // a head-chunked Ulysses whose chunks share a kv head sums their gradients so. Returns
  // whether the strategy does as asked (one that cannot is given temporaries instead).
  virtual bool accumulate_kv_grads(bool on) { return !on; }
  // dq: [S, H*h], dk, dv: [S, G*h] (=, or += under accumulate_kv_grads); o, q, k, v: what
  // forward kept (saved_layout's).
  virtual void backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                        const Mat<const T>& o, const Mat<const A>& saved, const Mat<const T>& q,
                        const Mat<const T>& k, const Mat<const T>& v) = 0;
};

// Builds a rank's strategy from its local tokens: their device global positions [S]
// and first visible positions q_lo [S] (empty when the mask is causal), and the
// sequence's mask, from which a strategy that attends over other tokens (a Ulysses
// group, ring blocks) derives theirs (strategy_factory.hpp; the model never knows
// which strategy it gets).
template <class T>
using AttentionFactory = std::function<std::unique_ptr<AttentionStrategy<T>>(
    Vec<const std::int64_t> positions, Vec<const std::int64_t> q_lo, const SequenceMask& mask)>;

}  // namespace minilst
