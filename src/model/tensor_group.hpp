// The tensor-parallel group a rank computes with (Megatron's tensor parallelism with sequence
// parallelism, parallel.tensor = T). The residual stream is split over the T ranks: rank t
// holds n rows, block t of its sequence piece (rows [t n, (t+1) n) of the piece's T n). The
// blocks between a norm and a residual add run on all T n rows with this rank's heads, MLP
// columns or vocabulary rows (core/tensor_slice.hpp), so each block is entered and left with:
//   gather          whole [T n, w] := every rank's part [n, w], in rank order  (all-gather)
//   reduce_scatter  part [n, w] := the sum over ranks of their whole's rows [t n, (t+1) n)
//                   (an all-to-all of the row blocks, then summed here in rank order in the
//                   accumulation type: deterministic, the same on MPI and NCCL and in bf16)
// Both are counted under their own operations (CommOp::tp_allgather, tp_reduce_scatter) and
// timed as Phase::tensor_comm. At T = 1 the layers never call them.
// Gradients of what the group's ranks hold alike (the norms; kv heads replicated over T/G
// ranks) are partial on each rank: sum_replicated adds them up over the ranks holding them.
#pragma once

#include <memory>
#include <vector>

#include "core/phases.hpp"
#include "core/range.hpp"
#include "core/tensor_slice.hpp"
#include "kernels/types.hpp"
#include "memory/tracker.hpp"
#include "parallel/communicator.hpp"

namespace minilst {

class TensorGroup {
 public:
  TensorGroup() = default;  // T = 1
  static const TensorGroup& none();  // the T = 1 group
  // comm: the T ranks of the group (null in `minilst plan`'s replay: the same buffers, no
  // transfers). Collective over comm when kv heads are replicated (their copies' communicator).
  TensorGroup(Communicator* comm, const TensorSlice& slice, PhaseTimers* timers);

  int size() const { return slice_.ranks; }
  int rank() const { return slice_.rank; }
  bool split() const { return slice_.ranks > 1; }
  const TensorSlice& slice() const { return slice_; }
  // The communicator of the ranks sharing this rank's kv heads (null unless replicated): its
  // bytes are the step's too (ParallelSetup::also_count).
  Communicator* kv_copies() const { return kv_copies_.get(); }

  // The block rows that hold residual rows r (of n): rank t's are rows t n + r, so
  // {t n + r : t < T}, in rank order; one range [0, T n) when r is all n rows (and r at T = 1).
  // MEMO's token-wise recompute of rows r under tensor parallelism writes these.
  std::vector<Range> block_segments(Range r, std::int64_t n) const;

  // whole [T n, w] := the T ranks' part [n, w] in rank order.
  template <class T>
  void gather(const Mat<T>& whole, const Mat<const T>& part) const;
  // part [n, w] := (accumulate: part +) the sum over the ranks of rows [t n, (t+1) n) of their
  // whole [T n, w], added in the accumulation type and rounded once. Uses a
  // receive buffer of whole's size (counted as communication memory). Both are replayed
  // without a communicator: the buffers alone.
  template <class T>
  void reduce_scatter(const Mat<T>& part, const Mat<const T>& whole, bool accumulate) const;

  // Gradients of tensors several ranks of the group hold (the same elements on each, partial
  // sums): summed over those ranks, in rank order, the same result on each. `norms`: held by
  // every rank of the group; `kv`: by the kv_copies ranks sharing this rank's kv heads.
  // Each a list of contiguous spans of `grads` (elements), packed (every rank's) into scratch.
  // Collective over the group.
  struct Span {
    std::size_t begin, count;
  };
  // scratch: at least replicated_scratch(norms, kv) elements (the caller's, counted once).
  template <class M>
  void sum_replicated(const Vec<M>& grads, const std::vector<Span>& norms, const std::vector<Span>& kv,
                      const Vec<M>& scratch) const;
  std::size_t replicated_scratch(const std::vector<Span>& norms, const std::vector<Span>& kv) const;
  // x summed over the group (buf: one double of device memory for the transfer).
  double sum(double x, const Vec<double>& buf) const;
  // Every rank's `mine` (the same length on each), in rank order (diagnostics: the tensor dump).
  std::vector<double> gather_host(const std::vector<double>& mine) const;

 private:
  Communicator* comm_ = nullptr;
  std::unique_ptr<Communicator> kv_copies_;  // the ranks holding this rank's kv heads (kv_copies > 1)
  TensorSlice slice_;
  PhaseTimers* timers_ = nullptr;
};

}  // namespace minilst
