#include "parallel/parallel_setup.hpp"

#ifdef MINILST_HAVE_NCCL
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

ParallelSetup::ParallelSetup(MPI_Comm world, const ParallelConfig& config, std::int64_t seq_len)
    : config_(config), world_comm_(world), world_(make_communicator(world)),
      layout_(seq_len, config.ulysses, config.ring, config.layout) {
  const int P = config.sequence_parallel(), w = world_->rank();
  dp_size_ = world_->size() / P;
  dp_index_ = w / P;
  sp_ = world_->split(dp_index_, w);
  const int s = sp_->rank();
  ulysses_ = sp_->split(s / config.ulysses, s);
  ring_ = sp_->split(s % config.ulysses, s);
}

std::string ParallelSetup::strategy_name() const {
  const int U = config_.ulysses, R = config_.ring;
  const std::string ring = R > 1 ? std::string(config_.variant == RingVariant::flash ? "ring" : "ring-rsa") + "(" +
                                       to_string(config_.layout) + ")"
                                 : "";
  if (U > 1 && R > 1) return "hybrid ulysses x " + ring;
  if (U > 1) return "ulysses";
  if (R > 1) return ring;
  return "local";
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

std::map<std::string, std::uint64_t> ParallelSetup::take_comm_bytes() {
  std::map<std::string, std::uint64_t> out;
  for (auto* c : {world_.get(), sp_.get(), ulysses_.get(), ring_.get()}) {
    for (const auto& [op, bytes] : c->bytes_sent()) out[op] += bytes;
    c->reset_bytes();
  }
  return out;
}

}  // namespace minilst
