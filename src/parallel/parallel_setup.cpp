#include "parallel/parallel_setup.hpp"

#include <stdexcept>

#include "parallel/mpi_communicator.hpp"

#ifdef MINILST_HAVE_NCCL
#include <Kokkos_Core.hpp>

#include "parallel/nccl_communicator.hpp"
#endif

namespace minilst {

namespace {
// NCCL on the Kokkos CUDA instance's stream where Kokkos has CUDA and NCCL was
// found; MPI otherwise. Sub-communicators are split from it, same backend.
std::unique_ptr<Communicator> make_communicator(MPI_Comm comm) {
#ifdef MINILST_HAVE_NCCL
  return std::make_unique<NcclCommunicator>(comm, Kokkos::Cuda().cuda_stream());
#else
  return std::make_unique<MpiCommunicator>(comm);
#endif
}
}  // namespace

ParallelSetup::ParallelSetup(MPI_Comm world, const ParallelConfig& config, std::int64_t seq_len,
                             const SequenceMask& mask)
    : config_(config), world_comm_(world), world_(make_communicator(world)),
      layout_(seq_len, config.ulysses, config.ring, config.layout, true, mask) {
  const int P = config.sequence_parallel(), T = config.tensor, w = world_->rank();
  dp_size_ = world_->size() / (P * T);
  dp_index_ = w / (P * T);
  tensor_ = world_->split(w / T, w);
  states_ = world_->split(w % T, w);
  sp_ = world_->split(dp_index_ * T + w % T, w);
  for (int r = 0; r < P; ++r)  // every tensor-parallel rank holds n = S_r / T of its sequence piece
    if (layout_.positions(r).size() % std::size_t(T) != 0)
      throw std::invalid_argument("parallel.tensor (" + std::to_string(T) + ") does not divide the " +
                                  std::to_string(layout_.positions(r).size()) + " tokens of sequence rank " +
                                  std::to_string(r) + " (parallel.ring_layout " + name_of(config.layout) +
                                  "): choose a run.seq_len or ring layout that splits evenly");
  const int s = sp_->rank();
  ulysses_ = sp_->split(s / config.ulysses, s);
  ring_ = sp_->split(s % config.ulysses, s);
}

Batch ParallelSetup::shard(const Batch& global) const {
  Batch local;
  for (const auto p : local_positions()) {
    local.tokens.push_back(global.tokens[p]);
    local.labels.push_back(global.labels[p]);
  }
  local.n_valid = global.n_valid;  // the loss is normalised by the whole sequence's count
  return local;
}

std::vector<Batch> ParallelSetup::shard(const std::vector<Batch>& globals) const {
  std::vector<Batch> local;
  for (const auto& b : globals) local.push_back(shard(b));
  return local;
}

CommBytes ParallelSetup::take_comm_bytes() {
  CommBytes out{};
  std::vector<Communicator*> all{world_.get(), tensor_.get(), states_.get(), sp_.get(), ulysses_.get(), ring_.get()};
  all.insert(all.end(), others_.begin(), others_.end());
  for (auto* c : all) {
    for (const CommOp op : all_of<CommOp>()) out[op] += c->bytes_sent()[op];
    c->reset_bytes();
  }
  return out;
}

}  // namespace minilst
