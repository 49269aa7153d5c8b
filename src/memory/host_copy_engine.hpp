// Host builds' copy engine: one worker thread runs the copies (memcpy between a
// device-space and a host-space allocation, both in host memory here) in
// submission order, both directions alike. submit fences the compute instance
// (the copy reads what compute wrote); order_compute_after is a wait (compute
// runs on the host's threads). With a bandwidth cap the worker copies in 1 MiB
// pieces and sleeps so that no copy finishes before bytes / bandwidth after the
// link became free: a laptop models a PCIe or NVLink-C2C link, and the stalls it
// causes.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "memory/copy_engine.hpp"

namespace minilst {

class HostCopyEngine final : public CopyEngine {
 public:
  explicit HostCopyEngine(double bandwidth_gbs);  // 0 = unthrottled
  ~HostCopyEngine() override;
  HostCopyEngine(const HostCopyEngine&) = delete;
  HostCopyEngine& operator=(const HostCopyEngine&) = delete;

  std::string name() const override;
  Ticket submit(void* dst, const void* src, std::size_t bytes, Direction direction) override;
  bool done(Ticket ticket) override;
  void wait(Ticket ticket) override;
  void order_compute_after(Ticket ticket) override { wait(ticket); }
  void wait_all() override;
  Counters take_counters() override;

 private:
  struct Job {
    void* dst;
    const void* src;
    std::size_t bytes;
    Direction direction;
  };
  void run();                 // the worker thread
  double copy(const Job& job);  // one job, throttled if a cap is set; returns the link's busy seconds

  double bytes_per_second_;   // 0: unthrottled
  std::mutex mutex_;
  std::condition_variable work_, finished_;
  std::deque<Job> queue_;
  Ticket submitted_ = 0, completed_ = 0;
  Counters counters_;
  bool stop_ = false;
  std::thread worker_;        // last: starts after everything above exists
};

}  // namespace minilst
