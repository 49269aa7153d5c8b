// Tensor types shared by all kernels.
//
// Dimension legend used in every kernel file:
//   S  tokens held locally (a chunk, a shard, or the whole sequence)
//   d  hidden size          H  query heads      G  kv heads (H % G == 0)
//   h  head dim = d / H     I  MLP intermediate V  vocabulary
// A matrix [S, H*h] stores head n of token i at columns n*h .. n*h+h-1 (token-major).
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>

namespace minilst {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;

// Row-major 2D tensor in the execution space's memory: rows are tokens.
template <class T, class Space = ExecSpace>
using Mat = Kokkos::View<T**, Kokkos::LayoutRight, typename Space::memory_space>;
// 1D tensor (norm weights, positions, labels, per-row statistics).
template <class T, class Space = ExecSpace>
using Vec = Kokkos::View<T*, typename Space::memory_space>;

// Accumulation type of reductions and softmax statistics: at least fp32.
template <class T> struct Accum { using type = T; };
template <class T> using accum_t = typename Accum<T>::type;
// Gradients, master weights and optimizer moments of a run computing in T: T
// itself, except under mixed precision (bf16.hpp), where they are fp32.
template <class T> using master_t = accum_t<T>;

constexpr std::int64_t kIgnoreLabel = -100;  // label excluded from the loss

// The shape of a 2D tensor.
struct Extent2 {
  std::int64_t rows = 0, cols = 0;
};

// Row range [begin, end) of a matrix: a chunk of tokens, still LayoutRight.
template <class View>
auto rows(const View& m, std::size_t begin, std::size_t end) {
  return Kokkos::subview(m, Kokkos::make_pair(begin, end), Kokkos::ALL);
}

}  // namespace minilst
