// Ulysses (DeepSpeed-Ulysses, ALST): before attention an all-to-all turns this
// rank's [S_local, heads, h] into [S_group, heads/U, h] (all tokens of the
// Ulysses group, a slice of the heads: attention_geometry.hpp says which); an
// inner strategy attends on that (local attention, or a ring across Ulysses
// groups: the 2D hybrid); the inverse all-to-all brings o back to [S_local, H, h].
// Forward scatters q, k, v straight into the head-sharded copies the backward
// reads (saved_layout: the store keeps them, with the inner strategy's o), so the
// backward does the seed's four all-to-alls: dO in, dQ, dK, dV out; the replicas
// of a replicated kv head have their dK/dV summed on the way back.
// Buffers: an all-to-all's send or receive buffer [S_local x heads of every
// member x h] (comm); in backward, group buffers [S_group, heads here x h] of dO,
// dq, dk, dv (comm). The kept q, k, v, o are activations (the store's).
#pragma once

#include <functional>
#include <memory>

#include "attention/attention_geometry.hpp"
#include "attention/attention_strategy.hpp"
#include "core/phases.hpp"
#include "parallel/communicator.hpp"

namespace minilst {

template <class T>
class UlyssesAttention final : public AttentionStrategy<T> {
 public:
  using A = accum_t<T>;
  // group: the U ranks of this Ulysses group (rank = member index); inner:
  // attention over the group's tokens with the heads of this member.
  UlyssesAttention(Communicator& group, const AttentionGeometry& g, std::unique_ptr<AttentionStrategy<T>> inner,
                   PhaseTimers* timers);

  // The inner strategy's statistics, over the group's tokens and this member's heads.
  Extent2 stats_shape(std::int64_t, std::int64_t) const override {
    return inner_->stats_shape(geometry_.group_rows(), geometry_.q_heads_here());
  }
  SavedLayout saved_layout(std::int64_t, std::int64_t, std::int64_t) const override { return geometry_.saved_layout(); }
  void forward(const Mat<T>& o, const Mat<A>& stats, const Mat<const T>& q, const Mat<const T>& k,
               const Mat<const T>& v, const AttentionKept<T>& kept) override;
  void keep_input(int input, const Mat<const T>& x, const AttentionKept<T>& kept) override;  // scatter into kept
  void forward_kept(const Mat<T>& o, const Mat<A>& stats, const AttentionKept<T>& kept) override;
  void backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                const Mat<const T>& o, const Mat<const A>& lse, const Mat<const T>& q, const Mat<const T>& k,
                const Mat<const T>& v) override;

  // The two all-to-alls (public: CUDA's extended lambdas need an accessible enclosing function).
  // x: [S_local, *] -> y: [S_group, heads(me) h]: scatter heads, gather tokens.
  void scatter_heads(const Mat<T>& y, const Mat<const T>& x, bool kv);
  // y: [S_group, heads(me) h] -> x: [S_local, *] (=, or += summing replicas when accumulate).
  void gather_heads(const Mat<T>& x, const Mat<const T>& y, bool kv, bool accumulate);

  // The buffers, for the run and for `minilst plan`'s replay.
  static Tracked<Vec<T>> exchange_buffer(const char* label, const AttentionGeometry& g, bool kv);
  static Tracked<Mat<T>> group_buffer(const char* label, const AttentionGeometry& g, bool kv, bool zero);
  // What forward and backward allocate, in their order, without compute; `inner`
  // replays the inner strategy's.
  static void replay_keep_input(const AttentionGeometry& g, int input);
  static void replay_forward_kept(const AttentionGeometry& g, const std::function<void()>& inner);
  static void replay_backward(const AttentionGeometry& g, const std::function<void()>& inner);

 private:
  HeadRange heads_of(int member, bool kv) const {
    return kv ? ulysses_kv_heads(member, U_, geometry_.kv_heads) : ulysses_q_heads(member, U_, geometry_.heads);
  }

  Communicator& group_;
  AttentionGeometry geometry_;
  int U_, me_, h_;
  std::unique_ptr<AttentionStrategy<T>> inner_;
  PhaseTimers* timers_;
};

}  // namespace minilst
