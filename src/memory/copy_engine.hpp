// The copy engine: moves bytes between device memory and host memory in the
// background, so that activation swapping overlaps compute (MEMO, ALST offload).
// Copies never run on the compute instance: on host builds one worker thread runs
// them; on CUDA builds each direction has a stream of its own (MEMO's three
// streams: compute, device-to-host, host-to-device), so a layer going out and
// one coming back move at once. Ordering with compute:
//   submit                  the copy starts after the work the compute instance
//                           holds at the call (CUDA: its stream waits on an event of
//                           the compute stream, device side; host engine: a fence of
//                           the compute instance): nothing to fence before submitting;
//   order_compute_after(t)  compute enqueued after the call runs after copy t:
//                           device side on CUDA (the compute stream waits on the
//                           copy's event, the host goes on), a wait on the host
//                           engine. For a consumer that is device compute: data
//                           copied in, or a device buffer copied out of and reused;
//   wait(t)                 blocks the host until copy t is complete: for a host
//                           that reads the data, or memory about to be freed.
// Tickets number the copies in submission order. Copies complete in that order
// within a direction only (the two streams are independent), so done(t) and
// wait(t) cover copy t and the earlier copies of its direction, not those of the
// other one (the host engine completes every copy in order, which is stronger).
// So a copy that reads what a copy of the other direction wrote (host memory
// coming back) follows it through the compute: order_compute_after(out), then
// submit(in). The caller touches neither buffer of a copy before waiting or
// ordering on it.
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
    // The completed copies' durations (throttled ones: their link time), summed over
    // both directions: each direction's link time, so bytes / busy_seconds is the rate
    // of one direction even where the two overlap (and the sum exceeds the wall time).
    double busy_seconds = 0;
  };

  virtual ~CopyEngine() = default;
  virtual std::string name() const = 0;
  // Starts copying `bytes` from src to dst (dst is host memory for to_host), after
  // the compute instance's work so far.
  virtual Ticket submit(void* dst, const void* src, std::size_t bytes, Direction direction) = 0;
  virtual bool done(Ticket ticket) = 0;                 // does not block
  virtual void wait(Ticket ticket) = 0;                 // blocks the host until done(ticket)
  virtual void order_compute_after(Ticket ticket) = 0;  // later compute runs after the copy
  virtual void wait_all() = 0;                          // blocks until every copy submitted is done
  virtual Counters take_counters() = 0;                 // waits for nothing; counts completed copies
};

}  // namespace minilst
