// Local attention: every key of the sequence is on this rank (no sequence
// parallelism, or the inner attention of a Ulysses group over the group's tokens).
#pragma once

#include <vector>

#include "attention/attention_strategy.hpp"

namespace minilst {

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
    Tracked<Mat<A>> delta(uninitialized, "attn_delta", MemCategory::workspace, lse.extent(0), lse.extent(1));
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
