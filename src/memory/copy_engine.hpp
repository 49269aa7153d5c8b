// The copy engine: moves bytes between device memory and host memory in the
// background, so that activation swapping overlaps compute (MEMO, ALST offload).
// Copies run one after another in submission order, on their own resource (a
// worker thread on host builds, a CUDA stream on CUDA builds), never on the
// compute instance. Each submission returns a ticket; `wait` blocks until that
// copy (and every earlier one) is complete. The caller makes the source ready
// before submitting (fences the compute instance) and touches neither buffer
// until the ticket is done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace minilst {

class CopyEngine {
 public:
  enum class Direction { to_host, to_device };
  using Ticket = std::uint64_t;  // 0: nothing to wait for
  struct Counters {              // since the last take_counters()
    std::uint64_t bytes_to_host = 0, bytes_to_device = 0;
    double busy_seconds = 0;     // time the engine spent copying (or throttled), completed copies
  };

  virtual ~CopyEngine() = default;
  virtual std::string name() const = 0;
  // Starts copying `bytes` from src to dst (dst is host memory for to_host).
  virtual Ticket submit(void* dst, const void* src, std::size_t bytes, Direction direction) = 0;
  virtual bool done(Ticket ticket) = 0;  // does not block
  virtual void wait(Ticket ticket) = 0;  // blocks until done(ticket)
  virtual Counters take_counters() = 0;  // waits for nothing; counts completed copies
};

// The build's engine: CUDA stream on CUDA builds, a worker thread otherwise.
// bandwidth_gbs > 0 caps the worker thread's rate (GB/s = 1e9 bytes/s), to
// model a PCIe or NVLink-C2C link on a machine without one; CUDA builds refuse
// a cap (their link is real). Throws std::invalid_argument on a refused cap.
std::unique_ptr<CopyEngine> make_copy_engine(double bandwidth_gbs);

// Whether this build's engine can model a bandwidth cap (host builds).
bool copy_engine_supports_bandwidth_cap();

}  // namespace minilst
