// How a layer's core attention is made whole. The layer hands over its local
// q, k, v (after RoPE) and gets o back; it does not know whether the other
// tokens live on this rank (LocalAttention), arrive by all-to-all (Ulysses) or
// travel around a ring. What the backward needs beyond q, k, v, o (the
// log-sum-exp rows, the "statistics") is written by forward into a buffer the
// caller provides in the shape the strategy names (stats_shape): the activation
// store keeps it with the layer's other saved tensors.
//   S local tokens, H query heads, G kv heads, h head dim.
#pragma once

#include <functional>
#include <memory>

#include "kernels/types.hpp"
#include "memory/tracker.hpp"

namespace minilst {

template <class T>
class AttentionStrategy {
 public:
  using A = accum_t<T>;
  virtual ~AttentionStrategy() = default;
  // Shape of the statistics forward saves for q of `rows` local tokens and `heads` query heads.
  virtual Extent2 stats_shape(std::int64_t rows, std::int64_t heads) const = 0;
  // o: [S, H*h] (=), stats: stats_shape(S, H) (=).
  virtual void forward(const Mat<T>& o, const Mat<A>& stats, const Mat<const T>& q, const Mat<const T>& k,
                       const Mat<const T>& v) = 0;
  // dq: [S, H*h], dk, dv: [S, G*h] (=).
  virtual void backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                        const Mat<const T>& o, const Mat<const A>& saved, const Mat<const T>& q,
                        const Mat<const T>& k, const Mat<const T>& v) = 0;
};

// Builds a rank's strategy from the device positions of its local tokens
// (strategy_factory.hpp; the model never knows which strategy it gets).
template <class T>
using AttentionFactory = std::function<std::unique_ptr<AttentionStrategy<T>>(Vec<const std::int64_t> positions)>;

}  // namespace minilst
