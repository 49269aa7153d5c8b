// Softmax cross-entropy fused with its gradient, on a chunk of C tokens of the LM head.
//   logits: [C, V] in: logits, out: dlogits (overwritten in place), labels: [C]
//   loss_i    = logsumexp(logits_i) - logits_i[label_i]     (0 where label_i == -100)
//   dlogits_i = (softmax(logits_i) - onehot(label_i)) * grad_scale   (0 where ignored)
// grad_scale is 1 / N_valid of the whole sequence (all chunks, all ranks), so the
// chunks' gradients add up to the gradient of the mean loss. Returns sum_i loss_i
// (unscaled); the caller divides by N_valid. The [S, V] logits never exist at once.
// One exp per logit: e = exp(logit - max) is kept in place, then scaled by 1/sum.
// Layouts (row_layout.hpp): a thread per row on CPUs, a team per row on GPUs.
#pragma once

#include <Kokkos_Core.hpp>
#include <type_traits>

#include "compat.hpp"
#include "row_layout.hpp"
#include "tile_ops.hpp"
#include "types.hpp"

namespace minilst::kernels {

namespace detail {
template <class T>
double cross_entropy_thread_rows(const Mat<T>& logits, const Vec<const std::int64_t>& labels, double grad_scale) {
  using A = accum_t<T>;
  const int V = static_cast<int>(logits.extent(1));
  double loss_sum = 0;
  Kokkos::parallel_reduce("cross_entropy_fused", Kokkos::RangePolicy<ExecSpace>(0, logits.extent(0)),
      KOKKOS_LAMBDA(const int i, double& acc) {
        T* row = &logits(i, 0);
        const auto label = labels(i);
        if (label == kIgnoreLabel) {
          for (int c = 0; c < V; ++c) row[c] = T(0);
          return;
        }
        A mx = row[0];
#ifdef MINILST_HOST_SIMD
#pragma omp simd reduction(max : mx)
#endif
        for (int c = 1; c < V; ++c) mx = A(row[c]) > mx ? A(row[c]) : mx;
        const A target = row[label];
        A sum = 0;
#ifdef MINILST_HOST_SIMD
#pragma omp simd reduction(+ : sum)
#endif
        for (int c = 0; c < V; ++c) {
          const A e = tile::exp(A(row[c]) - mx);
          row[c] = T(e);
          sum += e;
        }
        acc += double(mx + compat::log(sum) - target);
        const A scale = A(grad_scale) / sum;
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
        for (int c = 0; c < V; ++c) row[c] = T(A(row[c]) * scale);
        if constexpr (std::is_same<T, A>::value) {
          row[label] = T(A(row[label]) - A(grad_scale));
        } else {  // bf16: p_label - 1 cancels, so from the fp32 probability, rounded once
          row[label] = T(tile::exp(target - mx) * scale - A(grad_scale));
        }
      },
      loss_sum);
  return loss_sum;
}

// The same, a team per row: thread t of the team on columns t, t + kRowTeam, ...; the
// max and the sum combined over the team (row_layout.hpp).
template <class T>
double cross_entropy_team_rows(const Mat<T>& logits, const Vec<const std::int64_t>& labels, double grad_scale) {
  using A = accum_t<T>;
  const int V = static_cast<int>(logits.extent(1));
  double loss_sum = 0;
  Kokkos::parallel_reduce("cross_entropy_fused_rows", row_teams(logits.extent(0)),
      KOKKOS_LAMBDA(const RowTeam& team, double& acc) {
        T* row = &logits(team.league_rank(), 0);
        const auto label = labels(team.league_rank());
        const int t0 = team.team_rank();
        if (label == kIgnoreLabel) {
          for (int c = t0; c < V; c += kRowTeam) row[c] = T(0);
          return;
        }
        A* slot = team_slots<A>(team);
        const A target = row[label];  // read before the first combine: no thread has written yet
        A mx = A(row[t0 < V ? t0 : 0]);
        for (int c = t0; c < V; c += kRowTeam) mx = A(row[c]) > mx ? A(row[c]) : mx;
        mx = team_combine(team, slot, mx, MaxOf{});
        A sum = 0;
        for (int c = t0; c < V; c += kRowTeam) {
          const A e = tile::exp(A(row[c]) - mx);
          row[c] = T(e);
          sum += e;
        }
        sum = team_combine(team, slot, sum, SumOf{});
        const A scale = A(grad_scale) / sum;
        for (int c = t0; c < V; c += kRowTeam) row[c] = T(A(row[c]) * scale);
        team.team_barrier();
        if (t0 == 0) {
          if constexpr (std::is_same<T, A>::value) {
            row[label] = T(A(row[label]) - A(grad_scale));
          } else {  // bf16: as above
            row[label] = T(tile::exp(target - mx) * scale - A(grad_scale));
          }
          acc += double(mx + compat::log(sum) - target);
        }
      },
      loss_sum);
  return loss_sum;
}
}  // namespace detail

template <class T>
double cross_entropy_fused(const Mat<T>& logits, const Vec<const std::int64_t>& labels, double grad_scale,
                           RowLayout layout = row_layout()) {
  return layout == RowLayout::team_per_row ? detail::cross_entropy_team_rows(logits, labels, grad_scale)
                                           : detail::cross_entropy_thread_rows(logits, labels, grad_scale);
}

}  // namespace minilst::kernels
