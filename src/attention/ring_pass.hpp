// The ring's two protocols over its members' blocks.
// ring_pass: the double-buffered rotation, written once for the flash forward, the
// flash backward and RSA's passes. Step t = 0..R-1 computes on the block of
// ring member b = (me - t) mod R, which is in buf[t % 2], while the next block
// (member b - 1's) is received into the other buffer from the previous member
// and this one is sent on to the next:
//   post receive(next block) and send(this block), start;  compute(t, b, this block, hop);  finish
// elements[b]: the length of member b's block in the buffer. reach[b]: the last step
// at which block b is needed (parallel/ring_reach.hpp): it is sent on at the steps
// t < reach[b] only, and the buffer of a step past it holds nothing (its compute must
// not read it); empty: every block visits every member. `compute` may call
// hop.progress() between slices (MPI moves a large message only inside MPI calls).
// ring_allreduce: a ring all-reduce (sum) of a buffer cut into the members' chunks
// (RSA's seed backward: the dK, dV partials, chunk b = block b's rows), below.
#pragma once

#include <cstdint>
#include <vector>

#include "attention/ring_hop.hpp"
#include "kernels/types.hpp"

namespace minilst {

template <class T, class Compute>
void ring_pass(Communicator& ring, PhaseTimers* timers, bool overlap, const Vec<T> (&buf)[2],
               const std::vector<std::int64_t>& elements, const std::vector<int>& reach, int tag,
               Compute&& compute) {
  const int R = ring.size(), me = ring.rank(), next = (me + 1) % R, prev = (me - 1 + R) % R;
  const auto owner = [&](int t) { return (me - t + R) % R; };
  const auto travels = [&](int t) { return reach.empty() || t < reach[owner(t)]; };  // step t's block goes on
  int cur = 0;
  for (int t = 0; t < R; ++t) {
    const int b = owner(t);
    RingHop hop(ring, timers, overlap);
    if (t + 1 < R) {
      // the previous member sends its step-t block, which is this one's step t + 1 block
      if (t + 1 <= (reach.empty() ? R : reach[owner(t + 1)]))
        hop.receive(buf[1 - cur].data(), std::size_t(elements[owner(t + 1)]), dtype_of<T>(), prev, tag);
      if (travels(t)) hop.send(buf[cur].data(), std::size_t(elements[b]), dtype_of<T>(), next, tag);
      hop.start();
    }
    compute(t, b, buf[cur], hop);
    hop.finish();
    cur = 1 - cur;
  }
}

// In-place sum over the ring of `data`, cut into chunks b = [offsets[b], offsets[b] +
// elements[b]), by the ring algorithm (scratch: the largest chunk):
//   reduce-scatter, t = 0..R-2: send chunk (me - t - 1) on; receive chunk (me - t - 2)
//                   into scratch and add it to data's (after R - 1 steps member me
//                   holds the whole sum of its own chunk);
//   all-gather,     t = 0..R-2: send chunk (me - t) on; receive chunk (me - t - 1) in place.
// A member sends every chunk but its own, then every chunk but its successor's:
// 2 (R - 1) / R of the buffer with equal chunks, counted under `op`. The sums run in
// a fixed order (chunk b from member b + 1 on), so every member gets the same bits.
template <class A>
void ring_allreduce(Communicator& ring, PhaseTimers* timers, const Vec<A>& data, const Vec<A>& scratch,
                    const std::vector<std::int64_t>& offsets, const std::vector<std::int64_t>& elements, int tag,
                    CommOp op) {
  const int R = ring.size(), me = ring.rank(), next = (me + 1) % R, prev = (me - 1 + R) % R;
  const auto chunk = [R](int c) { return ((c % R) + R) % R; };
  const auto hop = [&](A* into, int in, int out) {  // receive chunk `in`, send chunk `out`; both complete
    RingHop h(ring, timers, /*overlap=*/true);
    h.receive(into, std::size_t(elements[in]), dtype_of<A>(), prev, tag);
    h.send(data.data() + offsets[out], std::size_t(elements[out]), dtype_of<A>(), next, tag, op);
    h.finish();
  };
  for (int t = 0; t + 1 < R; ++t) {
    const int in = chunk(me - t - 2);
    hop(scratch.data(), in, chunk(me - t - 1));
    const std::int64_t off = offsets[in];
    const Vec<A> d = data, s = scratch;
    Kokkos::parallel_for("ring_allreduce_add", Kokkos::RangePolicy<ExecSpace>(0, elements[in]),
        KOKKOS_LAMBDA(const std::int64_t i) { d(off + i) += s(i); });
  }
  for (int t = 0; t + 1 < R; ++t) {
    const int in = chunk(me - t - 1);
    hop(data.data() + offsets[in], in, chunk(me - t));
  }
}

}  // namespace minilst
