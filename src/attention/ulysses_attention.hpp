// Ulysses (DeepSpeed-Ulysses, ALST): before attention an all-to-all turns this
// rank's [S_local, heads, h] into [S_group, heads/U, h] (all tokens of the
// Ulysses group, a slice of the heads: attention_geometry.hpp says which); an
// inner strategy attends on that (local attention, or a ring across Ulysses
// groups: the 2D hybrid); the inverse all-to-all brings o back to [S_local, H, h].
// Forward scatters q, k, v straight into the head-sharded copies the backward
// reads (saved_layout: the store keeps them, with the inner strategy's o), so the
// backward does the seed's four all-to-alls: dO in, dQ, dK, dV out; the replicas
// of a replicated kv head have their dK/dV summed on the way back.
// Head-chunked (attention_geometry.hpp: N chunks of the member's heads): each
// exchange moves one chunk's heads, the inner strategy attends one chunk at a time,
// and a chunk's output (forward: o; backward: dQ, and dK, dV where the kv heads are
// split among the chunks) goes home while the next chunk attends (ialltoallv).
// Where every chunk reads the member's one kv head, k and v travel once and their
// gradients are summed over the chunks before they go home once.
// Buffers: an all-to-all's send or receive buffer [S_local x one chunk's heads of
// every member x h] (comm); in backward, group buffers [S_group, a chunk's heads here
// x h] of dO, dq, dk, dv (comm; dk, dv all kv heads here where the chunks share them).
// The kept q, k, v, o are activations (the store's), chunk by chunk.
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

  // The inner strategy's statistics, over the group's tokens and all of this member's heads
  // (every chunk's, one block after another).
  Extent2 stats_shape(std::int64_t, std::int64_t) const override { return geometry_.stats_shape(); }
  SavedLayout saved_layout(std::int64_t, std::int64_t, std::int64_t) const override { return geometry_.saved_layout(); }
  void forward(const Mat<T>& o, const Mat<A>& stats, const Mat<const T>& q, const Mat<const T>& k,
               const Mat<const T>& v, const AttentionKept<T>& kept) override;
  void keep_input(int input, const Mat<const T>& x, const AttentionKept<T>& kept) override;  // scatter into kept
  void forward_kept(const Mat<T>& o, const Mat<A>& stats, const AttentionKept<T>& kept) override;
  void backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                const Mat<const T>& o, const Mat<const A>& lse, const Mat<const T>& q, const Mat<const T>& k,
                const Mat<const T>& v) override;

  // A chunk's output on its way home: started by start_gather, completed (and unpacked) by
  // finish_gather; it owns the buffers the transfer reads and writes.
  struct Gather {
    Mat<T> x;                  // where it lands: [S_local, *]
    bool kv = false;
    int chunk = 0;
    Tracked<Mat<T>> source;    // the group buffer sent (empty: a kept tensor, alive anyway)
    Tracked<Vec<T>> recv;
    RequestPtr request;
    std::vector<std::int64_t> rd;  // receive displacements per member
  };

  // The two all-to-alls of chunk c (public: CUDA's extended lambdas need an accessible enclosing function).
  // x: [S_local, *] -> y: [S_group, chunk c's heads(me) h]: scatter heads, gather tokens.
  void scatter_heads(const Mat<T>& y, const Mat<const T>& x, bool kv, int c);
  // y: [S_group, chunk c's heads(me) h] -> x: [S_local, *]: the transfer, non-blocking; then
  // x's columns of chunk c := (q) or += (kv: summing replicas and chunks; the caller zeroes x) what came.
  Gather start_gather(const Mat<T>& x, const Mat<const T>& y, bool kv, int c, Tracked<Mat<T>> source = {});
  void finish_gather(Gather& g);

  // The backward chunk by chunk; dkg_shared, dvg_shared: the group's dK, dV summed over the chunks
  // where every chunk reads the member's one kv head (else empty). (Public, as above.)
  void backward_chunks(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                       const Mat<const T>& og, const Mat<const A>& lse, const Mat<const T>& qg, const Mat<const T>& kg,
                       const Mat<const T>& vg, const Mat<T>& dkg_shared, const Mat<T>& dvg_shared);

  // The buffers, for the run and for `minilst plan`'s replay (one chunk's heads).
  static Tracked<Vec<T>> exchange_buffer(const char* label, const AttentionGeometry& g, bool kv);
  static Tracked<Mat<T>> group_buffer(const char* label, const AttentionGeometry& g, bool kv, bool zero);
  // What forward and backward allocate, in their order, without compute; `inner`
  // replays the inner strategy's.
  static void replay_keep_input(const AttentionGeometry& g, int input);
  static void replay_forward_kept(const AttentionGeometry& g, const std::function<void()>& inner);
  // inner_adds_kv: the inner strategy adds into dK, dV (accumulate_kv_grads: local attention does).
  static void replay_backward(const AttentionGeometry& g, bool inner_adds_kv, const std::function<void()>& inner);

 private:
  HeadRange heads_of(int member, bool kv, int c) const { return geometry_.chunk_heads(member, kv, c); }
  // Chunk c of a kept tensor (q, o: its query heads; k, v: its kv heads) and of the statistics.
  template <class M>
  M kept_chunk(const M& whole, bool kv, int c) const {
    const bool shared = kv && !geometry_.kv_chunked();  // one block every chunk reads
    const int heads = kv ? geometry_.chunk_kv_heads() : geometry_.chunk_q_heads();
    return chunk_block(whole, shared ? 0 : c, Extent2{geometry_.group_rows(), std::int64_t(heads) * h_});
  }
  template <class M>
  M stats_chunk(const M& whole, int c) const { return chunk_block(whole, c, geometry_.chunk().stats_shape()); }

  Communicator& group_;
  AttentionGeometry geometry_;
  int U_, me_, h_, N_;
  std::unique_ptr<AttentionStrategy<T>> inner_;
  PhaseTimers* timers_;
};

}  // namespace minilst
