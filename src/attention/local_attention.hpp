// Local attention: every key of the sequence is on this rank (no sequence
// parallelism, or the inner attention of a Ulysses group over the group's tokens).
// Queries and keys are the same tokens: q_pos = k_pos = the positions, q_lo their
// first visible positions (empty: causal; core/batch.hpp's SequenceMask).
// Buffers: backward's delta [S, H] (A); a Ulysses group's positions [S_group] and,
// unless causal, its q_lo [S_group].
#pragma once

#include <vector>

#include "attention/attention_strategy.hpp"
#include "kernels/select.hpp"

namespace minilst {

template <class T>
class LocalAttention final : public AttentionStrategy<T> {
 public:
  using A = accum_t<T>;
  // positions, q_lo: [S] each, or q_lo empty (causal).
  LocalAttention(Vec<const std::int64_t> positions, Vec<const std::int64_t> q_lo, int head_dim,
                 const KernelChoice& kernels)
      : pos_(positions), q_lo_(q_lo), head_dim_(head_dim), kernels_(kernels) {}
  // Owns device copies of the positions and q_lo (a Ulysses group's tokens; q_lo empty: causal).
  LocalAttention(const std::vector<std::int64_t>& positions, const std::vector<std::int64_t>& q_lo, int head_dim,
                 const KernelChoice& kernels)
      : owned_(position_buffer(std::int64_t(positions.size()))),
        owned_q_lo_(q_lo_buffer(std::int64_t(positions.size()), q_lo.empty())), head_dim_(head_dim),
        kernels_(kernels) {
    using HostIds = Kokkos::View<const std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
    Kokkos::deep_copy(owned_.view(), HostIds(positions.data(), positions.size()));
    if (!q_lo.empty()) Kokkos::deep_copy(owned_q_lo_.view(), HostIds(q_lo.data(), q_lo.size()));
    pos_ = owned_.view();
    q_lo_ = owned_q_lo_.view();
  }

  Extent2 stats_shape(std::int64_t rows, std::int64_t heads) const override { return {rows, heads}; }  // lse [S, H]

  void forward(const Mat<T>& o, const Mat<A>& lse, const Mat<const T>& q, const Mat<const T>& k,
               const Mat<const T>& v, const AttentionKept<T>&) override {  // local layout: kept = q, k, v, o
    kernels::attention_forward<T>(kernels_, o, lse, q, k, v, pos_, q_lo_, pos_, head_dim_);
  }

  bool accumulate_kv_grads(bool on) override {
    accumulate_kv_ = on;
    return true;
  }

  void backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                const Mat<const T>& o, const Mat<const A>& lse, const Mat<const T>& q,
                const Mat<const T>& k, const Mat<const T>& v) override {
    const auto delta = delta_buffer({std::int64_t(lse.extent(0)), std::int64_t(lse.extent(1))});
    Kokkos::deep_copy(ExecSpace(), dq, T(0));
    if (!accumulate_kv_) {  // (the kernel adds into dk, dv)
      Kokkos::deep_copy(ExecSpace(), dk, T(0));
      Kokkos::deep_copy(ExecSpace(), dv, T(0));
    }
    kernels::attention_backward<T>(kernels_, dq, dk, dv, delta.view(), d_o, o, lse, q, k, v, pos_, q_lo_, pos_,
                                   head_dim_);
  }

  // The buffers, for the run and for `minilst plan`'s replay.
  static Tracked<Vec<std::int64_t>> position_buffer(std::int64_t rows) {
    return Tracked<Vec<std::int64_t>>("attn_positions", MemCategory::workspace, rows);
  }
  static Tracked<Vec<std::int64_t>> q_lo_buffer(std::int64_t rows, bool causal) {  // none when causal
    return causal ? Tracked<Vec<std::int64_t>>() : Tracked<Vec<std::int64_t>>("attn_q_lo", MemCategory::workspace, rows);
  }
  static Tracked<Mat<A>> delta_buffer(Extent2 stats) {  // D_i = rowsum(dO_i * O_i), one per statistic
    return Tracked<Mat<A>>(uninitialized, "attn_delta", MemCategory::workspace, stats.rows, stats.cols);
  }

 private:
  Tracked<Vec<std::int64_t>> owned_, owned_q_lo_;
  Vec<const std::int64_t> pos_;   // [S] global positions of the tokens attended over
  Vec<const std::int64_t> q_lo_;  // [S] their first visible positions, or empty (causal)
  int head_dim_;
  KernelChoice kernels_;
  bool accumulate_kv_ = false;
};

}  // namespace minilst
