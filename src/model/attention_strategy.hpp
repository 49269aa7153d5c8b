// How a layer's core attention is made whole. The layer hands over its local
// q, k, v (after RoPE) and gets o back; it does not know whether the other
// tokens live on this rank (LocalAttention), arrive by all-to-all (Ulysses) or
// travel around a ring. What the backward needs beyond q, k, v, o (the
// log-sum-exp rows, the "statistics") is written by forward into a buffer the
// caller provides in the shape the strategy names (stats_shape): the activation
// store keeps it with the layer's other saved tensors.
//   S local tokens, H query heads, G kv heads, h head dim.
#pragma once

#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "memory/tracker.hpp"

namespace minilst {

template <class T>
class AttentionStrategy {
 public:
  using A = accum_t<T>;
  virtual ~AttentionStrategy() = default;
  virtual std::string name() const = 0;
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

// All tokens of the sequence are on this rank: the flash kernel, nothing else.
template <class T>
class LocalAttention final : public AttentionStrategy<T> {
 public:
  using A = accum_t<T>;
  LocalAttention(Vec<const std::int64_t> positions, int head_dim) : pos_(positions), head_dim_(head_dim) {}
  // Owns a device copy of the positions (e.g. a Ulysses group's tokens).
  LocalAttention(const std::vector<std::int64_t>& positions, int head_dim)
      : owned_("attn_positions", MemCategory::workspace, positions.size()), head_dim_(head_dim) {
    Kokkos::deep_copy(owned_.view(), Kokkos::View<const std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                         positions.data(), positions.size()));
    pos_ = owned_.view();
  }
  std::string name() const override { return "local"; }

  Extent2 stats_shape(std::int64_t rows, std::int64_t heads) const override { return {rows, heads}; }  // lse [S, H]

  void forward(const Mat<T>& o, const Mat<A>& lse, const Mat<const T>& q, const Mat<const T>& k,
               const Mat<const T>& v) override {
    kernels::attention_forward<T>(o, lse, q, k, v, pos_, pos_, head_dim_);
  }

  void backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                const Mat<const T>& o, const Mat<const A>& lse, const Mat<const T>& q,
                const Mat<const T>& k, const Mat<const T>& v) override {
    Tracked<Mat<A>> delta("attn_delta", MemCategory::workspace, lse.extent(0), lse.extent(1));
    Kokkos::deep_copy(ExecSpace(), dq, T(0));
    Kokkos::deep_copy(ExecSpace(), dk, T(0));
    Kokkos::deep_copy(ExecSpace(), dv, T(0));
    kernels::attention_backward<T>(dq, dk, dv, delta.view(), d_o, o, lse, q, k, v, pos_, pos_, head_dim_);
  }

 private:
  Tracked<Vec<std::int64_t>> owned_;
  Vec<const std::int64_t> pos_;  // [S] global positions of the tokens attended over
  int head_dim_;
};

}  // namespace minilst
