// Ulysses (DeepSpeed-Ulysses, ALST): before attention an all-to-all turns this
// rank's [S_local, heads, h] into [S_group, heads/U, h] (all tokens of the
// Ulysses group, a slice of the heads); an inner strategy attends on that (local
// attention, or a ring across Ulysses groups: the 2D hybrid); the inverse
// all-to-all brings o back to [S_local, H, h].
//   query heads: member u gets heads [u H/U, (u+1) H/U)            (needs H % U == 0)
//   kv heads:    G % U == 0: member u gets [u G/U, (u+1) G/U)
//                U % G == 0: replicated, member u gets head u / (U/G), the one its
//                q heads read; in backward the replicas' dK/dV are summed
// The backward redoes the all-to-all of q, k, v and o (the layer keeps them in
// the local layout) instead of keeping a second, head-sharded copy.
#pragma once

#include <memory>
#include <vector>

#include "attention/attention_strategy.hpp"
#include "io/phase_timers.hpp"
#include "parallel/communicator.hpp"

namespace minilst {

template <class T>
class UlyssesAttention final : public AttentionStrategy<T> {
 public:
  using A = accum_t<T>;
  // group: the U ranks of this Ulysses group (rank = member index);
  // member_rows[u]: tokens held by member u; inner: attention over the group's
  // tokens with the heads of this member (its positions are the group's).
  UlyssesAttention(Communicator& group, std::vector<std::int64_t> member_rows, int heads, int kv_heads, int head_dim,
                   std::unique_ptr<AttentionStrategy<T>> inner, PhaseTimers* timers);
  std::string name() const override { return "ulysses+" + inner_->name(); }

  // The inner strategy's statistics, over the group's tokens and this member's heads.
  Extent2 stats_shape(std::int64_t, std::int64_t) const override {
    return inner_->stats_shape(group_rows_, q_heads(me_, U_, H_).count);
  }
  void forward(const Mat<T>& o, const Mat<A>& stats, const Mat<const T>& q, const Mat<const T>& k,
               const Mat<const T>& v) override;
  void backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                const Mat<const T>& o, const Mat<const A>& lse, const Mat<const T>& q, const Mat<const T>& k,
                const Mat<const T>& v) override;

  struct Heads { int first, count; };  // a contiguous range of heads
  static Heads q_heads(int member, int U, int H) { return {member * (H / U), H / U}; }
  static Heads kv_heads(int member, int U, int G) {
    return G % U == 0 ? Heads{member * (G / U), G / U} : Heads{member / (U / G), 1};
  }

  // The two all-to-alls (public: CUDA's extended lambdas need an accessible enclosing function).
  // x: [S_local, *] -> [S_group, heads(me) h]: scatter heads, gather tokens.
  Tracked<Mat<T>> scatter_heads(const Mat<const T>& x, bool kv, const char* label);
  // y: [S_group, heads(me) h] -> x: [S_local, *] (=, or += summing replicas when accumulate).
  void gather_heads(const Mat<T>& x, const Mat<const T>& y, bool kv, bool accumulate);

 private:
  Heads heads_of(int member, bool kv) const { return kv ? kv_heads(member, U_, G_) : q_heads(member, U_, H_); }

  Communicator& group_;
  std::vector<std::int64_t> rows_;  // per member
  std::int64_t group_rows_ = 0;
  int U_, me_, H_, G_, h_;
  std::unique_ptr<AttentionStrategy<T>> inner_;
  PhaseTimers* timers_;
};

}  // namespace minilst
