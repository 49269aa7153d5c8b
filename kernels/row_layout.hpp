// How a row-wise kernel (one token per row: RMSNorm, SwiGLU, the LM head's
// cross-entropy) spreads its work over the device.
//   thread_per_row  one thread per row, the row's columns in a vectorised loop: a CPU
//                   core streams its own row (the host backends' layout)
//   team_per_row    one team per row, its columns over the team's threads: a GPU warp
//                   reads consecutive elements of one row (coalesced), and the row's
//                   sums and maxima are team reductions (the GPU backends' layout)
// Each such kernel takes the layout as its last argument, defaulting to the device's;
// the tests run both layouts on the host against the reference kernels.
#pragma once

#include <Kokkos_Core.hpp>

#include "types.hpp"

namespace minilst::kernels {

enum class RowLayout { thread_per_row, team_per_row };

constexpr RowLayout kDeviceRowLayout = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible
                                           ? RowLayout::thread_per_row
                                           : RowLayout::team_per_row;

using RowTeam = Kokkos::TeamPolicy<ExecSpace>::member_type;

// One team per row of `rows` (the team's size chosen by Kokkos: 1 on a host backend).
inline Kokkos::TeamPolicy<ExecSpace> row_teams(std::size_t rows) {
  return Kokkos::TeamPolicy<ExecSpace>(static_cast<int>(rows), Kokkos::AUTO);
}

// Every element of an [rows, cols] matrix, one per index (idx = i cols + j).
inline Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>> every_element(std::size_t rows, std::size_t cols) {
  return Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(0, std::int64_t(rows) * std::int64_t(cols));
}

}  // namespace minilst::kernels
