#include "memory/cuda_copy_engine.hpp"

#ifdef KOKKOS_ENABLE_CUDA
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/compat.hpp"

namespace minilst {

namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("copy engine: ") + what + ": " + cudaGetErrorString(e));
}
using Byte = unsigned char;
template <class Space>
using Bytes = Kokkos::View<Byte*, Space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class Space>
using ConstBytes = Kokkos::View<const Byte*, Space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
}  // namespace

CudaCopyEngine::CudaCopyEngine() {
  // Non-blocking: never implicitly ordered with the legacy default stream.
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  instance_.emplace(stream_);
}

CudaCopyEngine::~CudaCopyEngine() {
  cudaStreamSynchronize(stream_);
  instance_.reset();
  for (const auto& j : jobs_) spare_events_.insert(spare_events_.end(), {j.start, j.stop});
  for (auto e : spare_events_) cudaEventDestroy(e);
  cudaStreamDestroy(stream_);
}

cudaEvent_t CudaCopyEngine::event() {
  if (!spare_events_.empty()) {
    const auto e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  cudaEvent_t e;
  check(cudaEventCreate(&e), "cudaEventCreate");
  return e;
}

CopyEngine::Ticket CudaCopyEngine::submit(void* dst, const void* src, std::size_t bytes, Direction direction) {
  Job job{++submitted_, event(), event(), bytes, direction};
  check(cudaEventRecord(job.start, stream_), "cudaEventRecord");
  auto* d = static_cast<Byte*>(dst);
  const auto* s = static_cast<const Byte*>(src);
  if (direction == Direction::to_host)
    Kokkos::deep_copy(*instance_, Bytes<compat::HostPinnedSpace>(d, bytes), ConstBytes<Kokkos::CudaSpace>(s, bytes));
  else
    Kokkos::deep_copy(*instance_, Bytes<Kokkos::CudaSpace>(d, bytes), ConstBytes<compat::HostPinnedSpace>(s, bytes));
  check(cudaEventRecord(job.stop, stream_), "cudaEventRecord");
  jobs_.push_back(job);
  return job.ticket;
}

void CudaCopyEngine::retire() {
  while (!jobs_.empty()) {
    const Job& j = jobs_.front();
    const cudaError_t state = cudaEventQuery(j.stop);
    if (state == cudaErrorNotReady) return;
    check(state, "cudaEventQuery");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, j.start, j.stop), "cudaEventElapsedTime");
    counters_.busy_seconds += 1e-3 * ms;
    (j.direction == Direction::to_host ? counters_.bytes_to_host : counters_.bytes_to_device) += j.bytes;
    spare_events_.insert(spare_events_.end(), {j.start, j.stop});
    retired_ = j.ticket;
    jobs_.pop_front();
  }
}

bool CudaCopyEngine::done(Ticket ticket) {
  retire();
  return retired_ >= ticket;
}

void CudaCopyEngine::wait(Ticket ticket) {
  for (const auto& j : jobs_)
    if (j.ticket == ticket) check(cudaEventSynchronize(j.stop), "cudaEventSynchronize");
  retire();
}

CopyEngine::Counters CudaCopyEngine::take_counters() {
  retire();
  return std::exchange(counters_, Counters{});
}

}  // namespace minilst
#endif  // KOKKOS_ENABLE_CUDA
