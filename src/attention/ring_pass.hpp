// The ring's double-buffered rotation, written once for the flash forward, the
// flash backward and RSA's two passes. Step t = 0..R-1 computes on the block of
// ring member b = (me - t) mod R, which is in buf[t % 2], while the next block
// (member b - 1's) is received into the other buffer from the previous member
// and this one is sent on to the next:
//   post receive(next block) and send(this block), start;  compute(t, b, this block, hop);  finish
// elements[b]: the length of member b's block in the buffer. `compute` may call
// hop.progress() between slices (MPI moves a large message only inside MPI calls).
#pragma once

#include <cstdint>
#include <vector>

#include "attention/ring_hop.hpp"
#include "kernels/types.hpp"

namespace minilst {

template <class T, class Compute>
void ring_pass(Communicator& ring, PhaseTimers* timers, bool overlap, const Vec<T> (&buf)[2],
               const std::vector<std::int64_t>& elements, int tag, Compute&& compute) {
  const int R = ring.size(), me = ring.rank(), next = (me + 1) % R, prev = (me - 1 + R) % R;
  const auto owner = [&](int t) { return (me - t + R) % R; };
  int cur = 0;
  for (int t = 0; t < R; ++t) {
    const int b = owner(t);
    RingHop hop(ring, timers, overlap);
    if (t + 1 < R) {
      hop.receive(buf[1 - cur].data(), std::size_t(elements[owner(t + 1)]), dtype_of<T>(), prev, tag);
      hop.send(buf[cur].data(), std::size_t(elements[b]), dtype_of<T>(), next, tag);
      hop.start();
    }
    compute(t, b, buf[cur], hop);
    hop.finish();
    cur = 1 - cur;
  }
}

}  // namespace minilst
