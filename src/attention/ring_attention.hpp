// Ring attention: the K/V blocks of the R ring members travel around the ring
// (ring_pass.hpp); each rank attends its queries to every visiting block and
// merges the partial results by log-sum-exp (kernels/attention_merge.hpp).
//   Sq local query tokens, Hl query heads, Gl kv heads, h head dim on this rank;
//   block r: the tokens of ring member r (positions known to every rank).
// flash (default)  forward: at step t the block of member (me - t) is computed
//                  while the next one is received (isend/irecv, overlapped).
//                  backward: with the final O and LSE (no rescaling); dQ stays,
//                  each block's dK/dV accumulate in a buffer that travels with it
//                  and arrives home after R hops (fewer under a mask, below); each
//                  hop's transfer overlaps the next block's compute. Blocks are computed in slices of query
//                  rows with a progress call (Communicator::test) between slices.
// rsa              the seed paper's two-phase Ring Self-Attention (Li et al., arXiv
//                  2105.13120): a ring of K blocks fills the [Hl Sq, S] score matrix,
//                  softmax, then a ring of V blocks. It holds Hl x Sq x S scores (why
//                  the flash variant exists). Its backward (parallel.rsa_backward):
//   seed (default) the seed's: forward keeps P = softmax [Hl Sq, S] as its statistics
//                  (B Z L^2 / N of the paper); with delta_i = rowsum(dO_i o O_i),
//                  a ring of V blocks: dS_b = P_b o (dO V_b^T - delta), dV~_b = P_b^T dO;
//                  a ring of K blocks: dQ += dS_b K_b / sqrt(h), dK~_b = dS_b^T Q / sqrt(h);
//                  then ring all-reduces of the [S, Gl h] partials dK~, dV~ (every
//                  rank's queries' share of every key), of which a rank keeps its
//                  block's rows. Sent per layer: 2 passes of R - 1 blocks (in T) and two
//                  all-reduces (in A), 2 (R - 1) / R of [S, Gl h] each: 6 (R - 1) (S/R) Gl h
//                  elements with equal blocks, the paper's 6 (N-1) B Z (L/N) A (its A: h).
//   flash          the flash backward above, from LSE [Sq, Hl] (the statistics then).
// Masks: a visiting block's keys are masked against this rank's queries' global
// positions q_pos and first visible positions q_lo (key j visible to query i iff
// q_lo_i <= k_pos_j <= q_pos_i: causal, documents, a sliding window; SequenceMask).
// What is seen, and so what travels, is decided once from the positions every rank
// knows (parallel/ring_reach.hpp), the same on every rank:
//   compute  a block no local query sees is skipped (causal: the blocks after every
//            query; documents and windows: also the blocks before them). RSA's forward
//            computes every block (its scores are -inf there); its seed backward skips
//            them: P_b = 0.
//   sends    (flash) block b goes on only while a later member sees it: sent at steps
//            t < reach_b, where reach_b is the step of its farthest visitor (causal
//            contiguous: R - 1 - b; zigzag: R - 1; documents ending on the blocks' edges:
//            0, nothing sent). The backward's dK/dV accumulator of b travels with it up
//            to that visitor, then straight home (received into dk, dv); members between
//            that do not see it add zeros, so the sums are the full ring's, bit for bit.
//            RSA's passes and all-reduces send every block (the seed's schedule).
// Buffers (what forward and backward allocate, for the run and for the replay):
//   flash forward   kv[2] [2 max_rows Gl h] (comm), o_acc [Sq, Hl h] (A), o_block [Sq, Hl h], lse_block [Sq, Hl] (A)
//   rsa forward     scores [Hl Sq, S] (A; none with the seed backward: P is written into the
//                   statistics), blocks[2] [max_rows Gl h] (comm), o_acc [Sq, Hl h] (A)
//   backward        delta [Sq, Hl] (A), kv[2], dkv_in, dkv_out [2 max_rows Gl h] (comm), dkv_block (workspace)
//   rsa seed bwd    delta [Sq, Hl] (A), blocks[2] [max_rows Gl h] (comm), dS [Hl Sq, S] (A),
//                   dq_acc [Sq, Hl h] (A), dK~, dV~ [S, Gl h] (A, comm), allreduce_in [max_rows Gl h] (A, comm)
#pragma once

#include <vector>

#include "attention/attention_geometry.hpp"
#include "attention/attention_strategy.hpp"
#include "core/phases.hpp"
#include "parallel/communicator.hpp"

namespace minilst {

template <class T>
class RingAttention final : public AttentionStrategy<T> {
 public:
  using A = accum_t<T>;
  // block_positions[r]: global positions of ring member r's tokens (this rank's are
  // block_positions[ring.rank()], the order of q/k/v rows); mask: the sequence's, which
  // gives this rank's queries their q_lo; g: this rank's geometry (its heads here are
  // the inner strategy's under Ulysses).
  RingAttention(Communicator& ring, const AttentionGeometry& g,
                const std::vector<std::vector<std::int64_t>>& block_positions, const SequenceMask& mask,
                const KernelChoice& kernels, PhaseTimers* timers);

  // LSE [Sq, Hl]; RSA with the seed's backward: P [Hl Sq, S] (the geometry's, as the replay's).
  Extent2 stats_shape(std::int64_t, std::int64_t) const override { return geometry_.stats_shape(); }
  void forward(const Mat<T>& o, const Mat<A>& lse, const Mat<const T>& q, const Mat<const T>& k,
               const Mat<const T>& v, const AttentionKept<T>&) override;  // local layout: kept = q, k, v, o
  void backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                const Mat<const T>& o, const Mat<const A>& lse, const Mat<const T>& q, const Mat<const T>& k,
                const Mat<const T>& v) override;

  // Whether some local query sees some key of ring member `block`'s block (else its
  // compute is skipped).
  bool visible(int block) const { return visible_.at(block); }

  // The rsa variant's forward (stats: LSE, or P with the seed's backward) and the seed's
  // backward (p: the P forward kept) (public: CUDA's extended lambdas need an accessible
  // enclosing function).
  void forward_rsa(const Mat<T>& o, const Mat<A>& stats, const Mat<const T>& q, const Mat<const T>& k,
                   const Mat<const T>& v);
  void backward_rsa(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                    const Mat<const T>& o, const Mat<const A>& p, const Mat<const T>& q, const Mat<const T>& k,
                    const Mat<const T>& v);

  // This rank's sizes: query rows, the largest block, all blocks' rows, and the widths.
  struct Dims {
    std::int64_t Sq = 0, max_rows = 0, total_rows = 0, Hh = 0, Gh = 0, Hl = 0;
    bool p_in_stats = false;  // RSA's seed backward: P lives in the statistics, not in a scores buffer
  };
  static Dims dims(const AttentionGeometry& g);
  struct FlashForwardBuffers {
    Tracked<Vec<T>> kv[2];  // K rows then V rows of a block
    Tracked<Mat<A>> o_acc;
    Tracked<Mat<T>> o_block;
    Tracked<Mat<A>> lse_block;
  };
  struct RsaForwardBuffers {
    Tracked<Mat<A>> scores;  // empty when P goes to the statistics
    Tracked<Vec<T>> blocks[2];  // K (phase 1) or V (phase 2) rows of a block
    Tracked<Mat<A>> o_acc;
  };
  struct BackwardBuffers {
    Tracked<Mat<A>> delta;
    Tracked<Vec<T>> kv[2], dkv_in, dkv_out, dkv_block;
  };
  struct RsaBackwardBuffers {  // the seed's backward
    Tracked<Mat<A>> delta;
    Tracked<Vec<T>> blocks[2];  // V (first pass) or K (second pass) rows of a block
    Tracked<Mat<A>> dscores, dq_acc;
    Tracked<Mat<A>> dk_partial, dv_partial;  // [S, Gh]: all-reduced over the ring
    Tracked<Vec<A>> allreduce_in;            // one received chunk of the all-reduce
  };
  static FlashForwardBuffers flash_forward_buffers(const Dims& d);
  static RsaForwardBuffers rsa_forward_buffers(const Dims& d);
  static BackwardBuffers backward_buffers(const Dims& d);
  static RsaBackwardBuffers rsa_backward_buffers(const Dims& d);
  // The device positions of every block, and the q_lo of this rank's queries (none when
  // the mask is causal): the constructor's, and the replay's.
  static std::vector<Tracked<Vec<std::int64_t>>> position_buffers(const AttentionGeometry& g);
  static Tracked<Vec<std::int64_t>> q_lo_buffer(const AttentionGeometry& g, bool causal);

  // `minilst plan`: what forward and backward allocate, in their order, without compute.
  static void replay_forward(const AttentionGeometry& g);
  static void replay_backward(const AttentionGeometry& g);

 private:
  // One RSA ring pass of this rank's `own` rows (K or V, [rows, Gl h]) through `blocks`:
  // use(blk, block [rows_[blk], Gl h], hop) for every member's block as it visits.
  template <class Use>
  void rsa_pass(const Vec<T> (&blocks)[2], const Mat<const T>& own, Use&& use);

  Communicator& ring_;
  AttentionGeometry geometry_;
  int me_, head_dim_;
  KernelChoice kernels_;
  PhaseTimers* timers_;
  std::vector<std::int64_t> rows_;                // per block: token count
  std::vector<std::int64_t> col_;                 // per block: its first key column in [0, S) (RSA)
  std::vector<bool> visible_;                     // per block: whether any local query sees any of its keys
  std::vector<int> reach_;                        // per block: the last ring step at which it is seen (ring_reach.hpp)
  std::vector<Tracked<Vec<std::int64_t>>> pos_;   // per block, on the device
  Tracked<Vec<std::int64_t>> q_lo_;               // this rank's queries' first visible positions (empty: causal)
};

}  // namespace minilst
