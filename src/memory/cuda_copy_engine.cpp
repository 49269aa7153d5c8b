#include "memory/cuda_copy_engine.hpp"

#ifdef KOKKOS_ENABLE_CUDA
#include <stdexcept>
#include <string>
#include <utility>

namespace minilst {

namespace {
void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("copy engine: ") + call + " failed: " + cudaGetErrorName(e) + ": " +
                             cudaGetErrorString(e));
}
}  // namespace

CudaCopyEngine::CudaCopyEngine() : compute_(Kokkos::Cuda().cuda_stream()) {
  // Non-blocking: never implicitly ordered with the legacy default stream.
  for (auto& l : lanes_) check(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
}

CudaCopyEngine::~CudaCopyEngine() {  // no throwing from a destructor: errors ignored
  for (auto& l : lanes_) {
    cudaStreamSynchronize(l.stream);
    for (const auto& j : l.jobs) spare_events_.insert(spare_events_.end(), {j.start, j.stop});
    cudaStreamDestroy(l.stream);
  }
  for (auto e : spare_events_) cudaEventDestroy(e);
  cudaEventDestroy(compute_ready_);
}

cudaEvent_t CudaCopyEngine::event() {
  if (!spare_events_.empty()) {
    const auto e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  cudaEvent_t e;
  check(cudaEventCreate(&e), "cudaEventCreate");  // timed: busy time
  return e;
}

CopyEngine::Ticket CudaCopyEngine::submit(void* dst, const void* src, std::size_t bytes, Direction direction) {
  Lane& l = lane(direction);
  // The copy waits for the compute enqueued so far; a later record does not change
  // a wait already enqueued, so one event serves every submit.
  check(cudaEventRecord(compute_ready_, compute_), "cudaEventRecord");
  check(cudaStreamWaitEvent(l.stream, compute_ready_, 0), "cudaStreamWaitEvent");
  Job job{++submitted_, event(), event(), bytes};
  check(cudaEventRecord(job.start, l.stream), "cudaEventRecord");
  const auto kind = direction == Direction::to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
  check(cudaMemcpyAsync(dst, src, bytes, kind, l.stream), "cudaMemcpyAsync");
  check(cudaEventRecord(job.stop, l.stream), "cudaEventRecord");
  l.jobs.push_back(job);
  return job.ticket;
}

const CudaCopyEngine::Job* CudaCopyEngine::pending(Ticket ticket) const {
  for (const auto& l : lanes_)
    for (const auto& j : l.jobs)
      if (j.ticket == ticket) return &j;
  return nullptr;
}

void CudaCopyEngine::retire() {
  for (auto& l : lanes_) {
    while (!l.jobs.empty()) {
      const Job& j = l.jobs.front();
      const cudaError_t state = cudaEventQuery(j.stop);
      if (state == cudaErrorNotReady) break;
      check(state, "cudaEventQuery");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, j.start, j.stop), "cudaEventElapsedTime");
      counters_.busy_seconds += 1e-3 * ms;
      (l.direction == Direction::to_host ? counters_.bytes_to_host : counters_.bytes_to_device) += j.bytes;
      spare_events_.insert(spare_events_.end(), {j.start, j.stop});
      l.jobs.pop_front();
    }
  }
}

bool CudaCopyEngine::done(Ticket ticket) {
  retire();
  return pending(ticket) == nullptr;
}

void CudaCopyEngine::wait(Ticket ticket) {
  if (const Job* j = pending(ticket)) check(cudaEventSynchronize(j->stop), "cudaEventSynchronize");
  retire();
}

void CudaCopyEngine::order_compute_after(Ticket ticket) {
  // The compute stream waits on the copy's stop event as recorded now: recycling
  // the event after the copy completes does not change that wait.
  if (const Job* j = pending(ticket)) check(cudaStreamWaitEvent(compute_, j->stop, 0), "cudaStreamWaitEvent");
}

void CudaCopyEngine::wait_all() {
  for (auto& l : lanes_) check(cudaStreamSynchronize(l.stream), "cudaStreamSynchronize");
  retire();
}

CopyEngine::Counters CudaCopyEngine::take_counters() {
  retire();
  return std::exchange(counters_, Counters{});
}

}  // namespace minilst
#endif  // KOKKOS_ENABLE_CUDA
