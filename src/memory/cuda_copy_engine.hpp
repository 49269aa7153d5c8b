// CUDA builds' copy engine: two non-blocking streams of its own, one per
// direction (device to pinned host, pinned host to device: compat::HostPinnedSpace),
// copy with cudaMemcpyAsync while the compute stream (the default execution space
// instance's) computes. Each copy's stream first waits on an event recorded on
// the compute stream at submit (device side: the host does not fence); each copy
// records a start and a stop event, the stop event being its ticket's completion
// (what done, wait and order_compute_after look at) and stop - start its busy time.
#pragma once

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>

#include <deque>
#include <vector>

#include "memory/copy_engine.hpp"

namespace minilst {

class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine();
  ~CudaCopyEngine() override;  // waits for every copy
  CudaCopyEngine(const CudaCopyEngine&) = delete;
  CudaCopyEngine& operator=(const CudaCopyEngine&) = delete;

  std::string name() const override { return "cuda-streams"; }
  Ticket submit(void* dst, const void* src, std::size_t bytes, Direction direction) override;
  bool done(Ticket ticket) override;
  void wait(Ticket ticket) override;
  void order_compute_after(Ticket ticket) override;
  void wait_all() override;
  Counters take_counters() override;

 private:
  struct Job {
    Ticket ticket;
    cudaEvent_t start, stop;
    std::size_t bytes;
  };
  struct Lane {                // one direction
    Direction direction;
    cudaStream_t stream = nullptr;
    std::deque<Job> jobs;      // submitted, not yet retired, in order (the order they complete in)
  };
  Lane& lane(Direction d) { return d == Direction::to_host ? lanes_[0] : lanes_[1]; }
  const Job* pending(Ticket ticket) const;  // the copy's job while not retired, else null
  void retire();  // counts the completed copies at each lane's front and recycles their events
  cudaEvent_t event();

  cudaStream_t compute_;                  // the default execution space instance's stream
  cudaEvent_t compute_ready_ = nullptr;   // recorded on compute_ at each submit
  Lane lanes_[2] = {{Direction::to_host}, {Direction::to_device}};
  std::vector<cudaEvent_t> spare_events_;
  Ticket submitted_ = 0;
  Counters counters_;
};

}  // namespace minilst
#endif  // KOKKOS_ENABLE_CUDA
