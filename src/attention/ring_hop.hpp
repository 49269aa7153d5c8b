// One hop of a ring transfer, the one place that knows its protocol: post the
// receive from the previous member and the send to the next (after fencing the
// compute instance, so the sent buffer is ready), let the transfers progress
// between compute slices (MPI without a progress thread moves a large message
// only inside MPI calls; the NCCL backend groups a hop's send and receive and
// launches them at the wait), and finish them, the time blocked counted as the
// phase ring_wait. Without overlap, start() waits at once (to measure what
// overlap hides).
#pragma once

#include <vector>

#include "core/phases.hpp"
#include "parallel/communicator.hpp"

namespace minilst {

class RingHop {
 public:
  RingHop(Communicator& ring, PhaseTimers* timers, bool overlap) : ring_(ring), timers_(timers), overlap_(overlap) {}
  RingHop(const RingHop&) = delete;
  RingHop& operator=(const RingHop&) = delete;
  ~RingHop() { finish(); }

  void receive(void* buf, std::size_t count, DType type, int from, int tag) {
    open_.push_back(ring_.irecv(buf, count, type, from, tag));
  }
  void send(const void* buf, std::size_t count, DType type, int to, int tag) {
    compat::fence("ring: buffer ready to send");
    open_.push_back(ring_.isend(buf, count, type, to, tag, "ring"));
  }
  void start() {  // after posting: waits at once when overlap is off
    if (!overlap_) finish();
  }
  void progress() {  // between compute slices
    for (auto& r : open_) ring_.test(r);
  }
  void finish() {
    bool pending = false;
    for (auto& r : open_) pending |= bool(r);
    if (!pending) {
      open_.clear();
      return;
    }
    ScopedPhase wait(timers_, Phase::ring_wait);
    for (auto& r : open_) ring_.wait(r);
    open_.clear();
  }

 private:
  Communicator& ring_;
  PhaseTimers* timers_;
  bool overlap_;
  std::vector<RequestPtr> open_;
};

}  // namespace minilst
