// How a row-wise kernel (one token per row: RMSNorm, SwiGLU, the LM head's
// cross-entropy) spreads its work over the device.
//   thread_per_row  one thread per row, the row's columns in a vectorised loop: a CPU
//                   core streams its own row (the host backends' layout)
//   team_per_row    one team of kRowTeam threads per row, thread t on columns t,
//                   t + kRowTeam, ...: a GPU warp reads consecutive elements of one row
//                   (coalesced); the row's sums and maxima are combined in team scratch,
//                   in a fixed tree order (the same result on every run)
// Each such kernel takes the layout as its last argument, defaulting to row_layout():
// thread_per_row, or MINILST_ROW_LAYOUT=team|thread where set. team_per_row is meant
// for GPUs and becomes their default once the device check has passed with it (its
// part `team_rows`); until then every backend runs the layout the first GPU check
// passed with. The tests run both layouts on the host against the reference kernels.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdlib>
#include <cstring>

#include "types.hpp"

namespace minilst::kernels {

enum class RowLayout { thread_per_row, team_per_row };

constexpr bool kHostRows = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;
constexpr int kRowTeam = kHostRows ? 1 : 128;  // threads per row's team (a power of two)

inline RowLayout row_layout() {
  static const RowLayout layout = [] {
    const char* v = std::getenv("MINILST_ROW_LAYOUT");
    if (v && std::strcmp(v, "thread") == 0) return RowLayout::thread_per_row;
    if (v && std::strcmp(v, "team") == 0) return RowLayout::team_per_row;
    return RowLayout::thread_per_row;
  }();
  return layout;
}

using RowPolicy = Kokkos::TeamPolicy<ExecSpace>;
using RowTeam = RowPolicy::member_type;

// One team of kRowTeam threads per row of `rows`, with a slot per thread for the combines.
inline RowPolicy row_teams(std::size_t rows) {
  return RowPolicy(static_cast<int>(rows), kRowTeam).set_scratch_size(0, Kokkos::PerTeam(kRowTeam * sizeof(double)));
}

// The team's slots (take once per kernel), and the sum or max of each thread's part
// over the team, returned to every thread.
template <class A>
KOKKOS_INLINE_FUNCTION A* team_slots(const RowTeam& team) {
  return static_cast<A*>(team.team_scratch(0).get_shmem(sizeof(A) * kRowTeam));
}
struct SumOf {
  template <class A>
  KOKKOS_INLINE_FUNCTION A operator()(A a, A b) const { return a + b; }
};
struct MaxOf {
  template <class A>
  KOKKOS_INLINE_FUNCTION A operator()(A a, A b) const { return a > b ? a : b; }
};
template <class A, class Op>
KOKKOS_INLINE_FUNCTION A team_combine(const RowTeam& team, A* slot, A part, Op op) {
  const int t = team.team_rank();
  team.team_barrier();  // whoever read the slots last is done
  slot[t] = part;
  team.team_barrier();
  for (int w = kRowTeam / 2; w > 0; w /= 2) {
    if (t < w) slot[t] = op(slot[t], slot[t + w]);
    team.team_barrier();
  }
  return slot[0];
}

// Every element of an [rows, cols] matrix, one per index (idx = i cols + j).
inline Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>> every_element(std::size_t rows, std::size_t cols) {
  return Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(0, std::int64_t(rows) * std::int64_t(cols));
}

}  // namespace minilst::kernels
