// Ring attention: the K/V blocks of the R ring members travel around the ring
// (ring_pass.hpp); each rank attends its queries to every visiting block and
// merges the partial results by log-sum-exp (kernels/attention_merge.hpp).
//   Sq local query tokens, Hl query heads, Gl kv heads, h head dim on this rank;
//   block r: the tokens of ring member r (positions known to every rank).
// flash (default)  forward: at step t the block of member (me - t) is computed
//                  while the next one is received (isend/irecv, overlapped).
//                  backward: with the final O and LSE (no rescaling); dQ stays,
//                  each block's dK/dV accumulate in a buffer that travels with it
//                  and arrives home after R hops; each hop's transfer overlaps the
//                  next block's compute. Blocks are computed in slices of query
//                  rows with a progress call (Communicator::test) between slices.
// rsa              the seed paper's two-phase Ring Self-Attention: a ring of K
//                  blocks fills the [Sq, S] score matrix of every head, softmax,
//                  then a ring of V blocks. It holds Hl x Sq x S scores (why the
//                  flash variant exists); its backward is the flash one.
// Blocks whose keys all follow every query (causal) are skipped, not computed.
// Buffers (what forward and backward allocate, for the run and for the replay):
//   flash forward   kv[2] [2 max_rows Gl h] (comm), o_acc [Sq, Hl h] (A), o_block [Sq, Hl h], lse_block [Sq, Hl] (A)
//   rsa forward     scores [Hl Sq, S] (A), blocks[2] [max_rows Gl h] (comm), o_acc [Sq, Hl h] (A)
//   backward        delta [Sq, Hl] (A), kv[2], dkv_in, dkv_out [2 max_rows Gl h] (comm), dkv_block (workspace)
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
  // block_positions[ring.rank()], the order of q/k/v rows); g: this rank's geometry
  // (its heads here are the inner strategy's under Ulysses).
  RingAttention(Communicator& ring, const AttentionGeometry& g,
                const std::vector<std::vector<std::int64_t>>& block_positions, KernelVariant kernels,
                PhaseTimers* timers);

  Extent2 stats_shape(std::int64_t rows, std::int64_t heads) const override { return {rows, heads}; }  // lse
  void forward(const Mat<T>& o, const Mat<A>& lse, const Mat<const T>& q, const Mat<const T>& k,
               const Mat<const T>& v) override;
  void backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                const Mat<const T>& o, const Mat<const A>& lse, const Mat<const T>& q, const Mat<const T>& k,
                const Mat<const T>& v) override;

  // The rsa variant's forward (public: CUDA's extended lambdas need an accessible enclosing function).
  void forward_rsa(const Mat<T>& o, const Mat<A>& lse, const Mat<const T>& q, const Mat<const T>& k,
                   const Mat<const T>& v);

  // This rank's sizes: query rows, the largest block, all blocks' rows, and the widths.
  struct Dims {
    std::int64_t Sq = 0, max_rows = 0, total_rows = 0, Hh = 0, Gh = 0, Hl = 0;
  };
  static Dims dims(const AttentionGeometry& g);
  struct FlashForwardBuffers {
    Tracked<Vec<T>> kv[2];  // K rows then V rows of a block
    Tracked<Mat<A>> o_acc;
    Tracked<Mat<T>> o_block;
    Tracked<Mat<A>> lse_block;
  };
  struct RsaForwardBuffers {
    Tracked<Mat<A>> scores;
    Tracked<Vec<T>> blocks[2];  // K (phase 1) or V (phase 2) rows of a block
    Tracked<Mat<A>> o_acc;
  };
  struct BackwardBuffers {
    Tracked<Mat<A>> delta;
    Tracked<Vec<T>> kv[2], dkv_in, dkv_out, dkv_block;
  };
  static FlashForwardBuffers flash_forward_buffers(const Dims& d);
  static RsaForwardBuffers rsa_forward_buffers(const Dims& d);
  static BackwardBuffers backward_buffers(const Dims& d);
  // The device positions of every block (the constructor's, and the replay's).
  static std::vector<Tracked<Vec<std::int64_t>>> position_buffers(const AttentionGeometry& g);

  // `minilst plan`: what forward and backward allocate, in their order, without compute.
  static void replay_forward(const AttentionGeometry& g);
  static void replay_backward(const AttentionGeometry& g);

 private:
  bool visible(int block) const { return min_pos_[block] <= max_q_pos_; }  // any key before some query

  Communicator& ring_;
  AttentionGeometry geometry_;
  int me_, head_dim_;
  KernelVariant kernels_;
  PhaseTimers* timers_;
  std::vector<std::int64_t> rows_, min_pos_;      // per block: token count, smallest position
  std::int64_t max_q_pos_ = -1;
  std::vector<Tracked<Vec<std::int64_t>>> pos_;   // per block, on the device
};

}  // namespace minilst
