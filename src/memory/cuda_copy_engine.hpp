// CUDA builds' copy engine: its own Kokkos execution-space instance, on its own
// non-blocking stream, copies between device memory and pinned host memory
// (compat::HostPinnedSpace) with Kokkos::deep_copy(instance, ...), so copies
// run while the compute instance computes. A pair of CUDA events per copy gives
// its ticket (the stop event) and its busy time (stop - start).
#pragma once

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>

#include <deque>
#include <optional>
#include <vector>

#include "memory/copy_engine.hpp"

namespace minilst {

class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine();
  ~CudaCopyEngine() override;
  CudaCopyEngine(const CudaCopyEngine&) = delete;
  CudaCopyEngine& operator=(const CudaCopyEngine&) = delete;

  std::string name() const override { return "cuda-stream"; }
  Ticket submit(void* dst, const void* src, std::size_t bytes, Direction direction) override;
  bool done(Ticket ticket) override;
  void wait(Ticket ticket) override;
  Counters take_counters() override;

 private:
  struct Job {
    Ticket ticket;
    cudaEvent_t start, stop;
    std::size_t bytes;
    Direction direction;
  };
  void retire();  // counts the completed copies at the front and recycles their events
  cudaEvent_t event();

  cudaStream_t stream_ = nullptr;
  std::optional<Kokkos::Cuda> instance_;  // the engine's instance, on stream_
  std::deque<Job> jobs_;                  // submitted, not yet retired (in order)
  std::vector<cudaEvent_t> spare_events_;
  Ticket submitted_ = 0, retired_ = 0;
  Counters counters_;
};

}  // namespace minilst
#endif  // KOKKOS_ENABLE_CUDA
