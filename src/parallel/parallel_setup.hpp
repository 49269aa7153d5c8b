// The parallel world of a run: communicators, sequence layout and the attention
// strategy each rank uses. World rank w = d P + s (d: data-parallel replica, s:
// sequence-parallel rank, P = U R); s = r U + u (u: Ulysses member, r: ring member).
//   sp:      the P ranks sharing one sequence
//   ulysses: U consecutive ranks (same r)         ring: R ranks with the same u
// Strategy by degrees: U = R = 1 local; U > 1 Ulysses (over local attention, or
// over a ring when R > 1: the 2D hybrid); U = 1, R > 1 ring.
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attention/local_attention.hpp"
#include "attention/ring_attention.hpp"
#include "attention/ulysses_attention.hpp"
#include "model/data.hpp"
#include "model/trainer.hpp"
#include "parallel/mpi_communicator.hpp"
#include "parallel/parallel_config.hpp"
#include "parallel/sequence_layout.hpp"

namespace minilst {

class ParallelSetup {
 public:
  ParallelSetup(MPI_Comm world, const ParallelConfig& config, std::int64_t seq_len);

  Communicator& world() { return *world_; }
  MPI_Comm world_comm() const { return world_comm_; }  // for host scalars (plain MPI)
  int dp_index() const { return dp_index_; }
  int dp_size() const { return dp_size_; }
  int sp_rank() const { return sp_->rank(); }
  const ParallelConfig& config() const { return config_; }
  const SequenceLayout& layout() const { return layout_; }
  const std::vector<std::int64_t>& local_positions() const { return layout_.positions(sp_->rank()); }
  std::string strategy_name() const;

  // This rank's part of a global sequence (tokens, labels at its positions; the global valid count).
  Batch shard(const Batch& global) const;

  template <class T>
  AttentionFactory<T> attention_factory(const ModelConfig& cfg, PhaseTimers* timers);

  // Bytes each operation sent since the last call, summed over all communicators.
  std::map<std::string, std::uint64_t> take_comm_bytes();

 private:
  ParallelConfig config_;
  MPI_Comm world_comm_;
  std::unique_ptr<Communicator> world_, sp_, ulysses_, ring_;
  SequenceLayout layout_;
  int dp_index_ = 0, dp_size_ = 1;
};

template <class T>
AttentionFactory<T> ParallelSetup::attention_factory(const ModelConfig& cfg, PhaseTimers* timers) {
  return [this, cfg, timers](Vec<const std::int64_t> positions) -> std::unique_ptr<AttentionStrategy<T>> {
    const int U = config_.ulysses, R = config_.ring, h = cfg.head_dim();
    if (U == 1 && R == 1) return std::make_unique<LocalAttention<T>>(positions, h);
    const int r = ring_->rank();
    std::unique_ptr<AttentionStrategy<T>> inner;
    if (R > 1) {
      std::vector<std::vector<std::int64_t>> blocks;  // ring member r' attends over its group's tokens
      for (int b = 0; b < R; ++b) blocks.push_back(layout_.group_positions(b));
      inner = std::make_unique<RingAttention<T>>(*ring_, blocks, h, config_.variant, config_.overlap, timers);
    } else {
      inner = std::make_unique<LocalAttention<T>>(layout_.group_positions(r), h);
    }
    if (U == 1) return inner;
    std::vector<std::int64_t> member_rows;
    for (int u = 0; u < U; ++u) member_rows.push_back(std::int64_t(layout_.positions(r * U + u).size()));
    return std::make_unique<UlyssesAttention<T>>(*ulysses_, member_rows, cfg.heads, cfg.kv_heads, h, std::move(inner),
                                                 timers);
  };
}

}  // namespace minilst
