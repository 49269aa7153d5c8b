// The stand-in strategy of `minilst plan`'s replay (memory_context.hpp): built
// from a rank's geometry alone (no communicator, no positions), it allocates what
// the real strategy of that geometry allocates, in the same order, from the same
// buffer functions, and computes nothing.
#pragma once

#include <vector>

#include "attention/attention_geometry.hpp"
#include "attention/local_attention.hpp"
#include "attention/ring_attention.hpp"
#include "attention/ulysses_attention.hpp"

namespace minilst {

template <class T>
class ReplayAttention final : public AttentionStrategy<T> {
 public:
  using A = accum_t<T>;
  // causal: the sequence's mask is plain causal (no q_lo buffers).
  ReplayAttention(const AttentionGeometry& g, bool causal) : g_(g) {  // the real constructor's buffers
    if (g.R() > 1) {
      positions_ = RingAttention<T>::position_buffers(g);
      q_lo_ = RingAttention<T>::q_lo_buffer(g, causal);
    } else if (g.U() > 1) {
      positions_.push_back(LocalAttention<T>::position_buffer(g.group_rows()));
      q_lo_ = LocalAttention<T>::q_lo_buffer(g.group_rows(), causal);
    }
  }

  Extent2 stats_shape(std::int64_t, std::int64_t) const override { return g_.stats_shape(); }

  SavedLayout saved_layout(std::int64_t, std::int64_t, std::int64_t) const override { return g_.saved_layout(); }

  void forward(const Mat<T>& o, const Mat<A>& stats, const Mat<const T>& q, const Mat<const T>& k,
               const Mat<const T>& v, const AttentionKept<T>& kept) override {
    if (g_.U() == 1) return inner_forward();
    keep_input(0, q, kept);
    keep_input(1, k, kept);
    keep_input(2, v, kept);
    forward_kept(o, stats, kept);
  }
  void keep_input(int input, const Mat<const T>&, const AttentionKept<T>&) override {
    UlyssesAttention<T>::replay_keep_input(g_, input);
  }
  void forward_kept(const Mat<T>&, const Mat<A>&, const AttentionKept<T>&) override {
    UlyssesAttention<T>::replay_forward_kept(g_, [this] { inner_forward(); });
  }

  void backward(const Mat<T>&, const Mat<T>&, const Mat<T>&, const Mat<const T>&, const Mat<const T>&,
                const Mat<const A>&, const Mat<const T>&, const Mat<const T>&, const Mat<const T>&) override {
    const AttentionGeometry gc = g_.chunk();  // what the inner strategy attends over at a time
    const auto inner = [gc] {
      if (gc.R() > 1) RingAttention<T>::replay_backward(gc);
      else LocalAttention<T>::delta_buffer(gc.stats_shape());
    };
    if (g_.U() > 1) UlyssesAttention<T>::replay_backward(g_, g_.R() == 1, inner);
    else inner();
  }

 private:
  void inner_forward() const {
    if (g_.R() > 1) RingAttention<T>::replay_forward(g_.chunk());  // local attention allocates nothing
  }

  AttentionGeometry g_;
  std::vector<Tracked<Vec<std::int64_t>>> positions_;
  Tracked<Vec<std::int64_t>> q_lo_;
};

// What the memory model builds its strategy with: ReplayAttention of this geometry.
template <class T>
AttentionFactory<T> make_replay_factory(const AttentionGeometry& g) {
  return [g](Vec<const std::int64_t>, Vec<const std::int64_t>, const SequenceMask& mask)
             -> std::unique_ptr<AttentionStrategy<T>> {
    return std::make_unique<ReplayAttention<T>>(g, mask.causal_only());
  };
}

}  // namespace minilst
