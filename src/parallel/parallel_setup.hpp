// The parallel world of a run: communicators and the sequence layout. World rank
// w = (d P + s) T + t (d: data-parallel replica, s: sequence-parallel rank, P = U R, t: the
// tensor-parallel rank, innermost: a TP group's ranks share a node); s = r U + u (u: Ulysses
// member, r: ring member).
//   tensor:  the T consecutive ranks splitting one model (T = parallel.tensor)
//   states:  the ranks holding the same slice of the model (the same t): its gradients' reduction and ZeRO
//   sp:      the P ranks sharing one sequence (the same t)
//   ulysses: U ranks of sp (same r)               ring: R ranks of sp with the same u
// Which attention strategy runs on them is attention/strategy_factory.hpp's call.
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/batch.hpp"
#include "core/parallel_config.hpp"
#include "parallel/communicator.hpp"
#include "parallel/sequence_layout.hpp"

namespace minilst {

class ParallelSetup {
 public:
  // mask: the sequence's attention mask (the balanced ring layout deals tokens by its costs).
  ParallelSetup(MPI_Comm world, const ParallelConfig& config, std::int64_t seq_len,
                const SequenceMask& mask = SequenceMask{});

  Communicator& world() { return *world_; }
  Communicator& tensor() { return *tensor_; }
  Communicator& states() { return *states_; }
  Communicator& ulysses() { return *ulysses_; }
  Communicator& ring() { return *ring_; }
  MPI_Comm world_comm() const { return world_comm_; }  // for host scalars (plain MPI)
  int dp_index() const { return dp_index_; }
  int dp_size() const { return dp_size_; }
  int sp_rank() const { return sp_->rank(); }
  const ParallelConfig& config() const { return config_; }
  const SequenceLayout& layout() const { return layout_; }
  const std::vector<std::int64_t>& local_positions() const { return layout_.positions(sp_->rank()); }
  // Whether ring transfers really overlap compute: asked for, and the backend can.
  bool ring_overlaps() const { return config_.overlap && world_->overlaps_transfers(); }

  // This rank's part of a global sequence (tokens, labels at its positions; the global valid count).
  Batch shard(const Batch& global) const;
  std::vector<Batch> shard(const std::vector<Batch>& globals) const;

  // Bytes each operation sent since the last call, summed over all communicators (and those
  // handed to also_count: communicators others split from these, counted while they live; the
  // tensor-parallel group's kv-copies one).
  CommBytes take_comm_bytes();
  void also_count(Communicator& c) { others_.push_back(&c); }

 private:
  ParallelConfig config_;
  MPI_Comm world_comm_;
  std::unique_ptr<Communicator> world_, tensor_, states_, sp_, ulysses_, ring_;
  std::vector<Communicator*> others_;
  SequenceLayout layout_;
  int dp_index_ = 0, dp_size_ = 1;
};

}  // namespace minilst
