// One hop of a ring transfer, the one place that knows its protocol: post the
// receive from the previous member and the send to the next, start them at once
// (Communicator::launch: the NCCL backend launches a tag's send and receive as
// one group, on its own stream), let them progress between compute slices, and
// finish them, the time spent in the waits counted as the phase ring_wait.
// Without overlap, start() waits at once (to measure what overlap hides).
// Ordering with compute, by the communicator's kind (communicator.hpp):
//   host-ordered (MPI): posting a buffer fences the compute instance first (no
//     kernel still reads or writes it); progress() fences the slice just computed
//     and tests the transfers (MPI moves a large message only inside MPI calls);
//     finish() returns with the data in place, and ring_wait is the time blocked;
//   device-ordered (NCCL): no host fence; the transfers wait on the device for the
//     compute enqueued before start(), and finish() makes the compute stream wait
//     for them. ring_wait's timer fences the compute stream at its end (every timed
//     phase does), so it is the stall a late transfer causes, as on MPI.
#pragma once

#include <vector>

#include "core/phases.hpp"
#include "kernels/compat.hpp"
#include "parallel/communicator.hpp"

namespace minilst {

class RingHop {
 public:
  RingHop(Communicator& ring, PhaseTimers* timers, bool overlap) : ring_(ring), timers_(timers), overlap_(overlap) {}
  RingHop(const RingHop&) = delete;
  RingHop& operator=(const RingHop&) = delete;
  ~RingHop() { finish(); }

  void receive(void* buf, std::size_t count, DType type, int from, int tag) {
    hand_over("ring: buffer free to receive into");
    open_.push_back(ring_.irecv(buf, count, type, from, tag));
    posted(tag);
  }
  // op: the label the communicator counts the bytes under (CommOp::ring: the K/V blocks and their gradients).
  void send(const void* buf, std::size_t count, DType type, int to, int tag, CommOp op = CommOp::ring) {
    hand_over("ring: buffer ready to send");
    open_.push_back(ring_.isend(buf, count, type, to, tag, op));
    posted(tag);
  }
  void start() {  // after posting: launches; waits at once when overlap is off
    launch();
    if (!overlap_) finish();
  }
  void progress() {  // between compute slices
    if (open_.empty() || ring_.device_ordered()) return;  // nothing to move, or it moves on its own stream
    compat::fence("ring: slice done");
    for (auto& r : open_) ring_.test(r);
  }
  void finish() {  // launches what start() did not (the last post of a pass), then waits
    launch();
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
  void hand_over(const char* why) {
    if (!ring_.device_ordered()) compat::fence(why);
  }
  void posted(int tag) {
    for (int t : unlaunched_)
      if (t == tag) return;
    unlaunched_.push_back(tag);
  }
  void launch() {
    for (int tag : unlaunched_) ring_.launch(tag);
    unlaunched_.clear();
  }

  Communicator& ring_;
  PhaseTimers* timers_;
  bool overlap_;
  std::vector<RequestPtr> open_;
  std::vector<int> unlaunched_;  // tags posted since the last launch
};

}  // namespace minilst
