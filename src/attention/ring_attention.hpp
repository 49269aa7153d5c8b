// Ring attention: the K/V blocks of the R ring members travel around the ring;
// each rank attends its queries to every visiting block and merges the partial
// results by log-sum-exp (kernels/attention_merge.hpp).
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
#pragma once

#include <vector>

#include "attention/attention_strategy.hpp"
#include "io/phase_timers.hpp"
#include "parallel/communicator.hpp"
#include "parallel/parallel_config.hpp"

namespace minilst {

template <class T>
class RingAttention final : public AttentionStrategy<T> {
 public:
  using A = accum_t<T>;
  // block_positions[r]: global positions of ring member r's tokens (this rank's
  // are block_positions[ring.rank()], the order of q/k/v rows).
  RingAttention(Communicator& ring, const std::vector<std::vector<std::int64_t>>& block_positions, int head_dim,
                RingVariant variant, bool overlap, PhaseTimers* timers);
  std::string name() const override { return variant_ == RingVariant::flash ? "ring" : "ring-rsa"; }

  Extent2 stats_shape(std::int64_t rows, std::int64_t heads) const override { return {rows, heads}; }  // lse
  void forward(const Mat<T>& o, const Mat<A>& lse, const Mat<const T>& q, const Mat<const T>& k,
               const Mat<const T>& v) override;
  void backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o,
                const Mat<const T>& o, const Mat<const A>& lse, const Mat<const T>& q, const Mat<const T>& k,
                const Mat<const T>& v) override;

  // The rsa variant's forward (public: CUDA's extended lambdas need an accessible enclosing function).
  void forward_rsa(const Mat<T>& o, const Mat<A>& lse, const Mat<const T>& q, const Mat<const T>& k,
                   const Mat<const T>& v);

 private:
  int owner(int step) const { return (me_ - step + R_) % R_; }
  bool visible(int block) const { return min_pos_[block] <= max_q_pos_; }  // any key before some query

  Communicator& ring_;
  int R_, me_, next_, prev_, head_dim_;
  RingVariant variant_;
  bool overlap_;
  PhaseTimers* timers_;
  std::vector<std::int64_t> rows_, min_pos_;      // per block: token count, smallest position
  std::int64_t max_rows_ = 0, max_q_pos_ = -1;
  std::vector<Tracked<Vec<std::int64_t>>> pos_;   // per block, on the device
};

}  // namespace minilst
