// Vocabulary-parallel softmax cross-entropy (tensor parallelism: the LM head's columns split
// over T ranks). Rank t holds the logits of the vocabulary entries [v0, v0 + Vt) for the same
// C tokens; together the T shards give cross_entropy_fused's loss and dlogits to rounding.
//   1. cross_entropy_shard_stats: per row, over this shard,
//        m_t = max logit,  s_t = sum exp(l - m_t),  z_t = the label's logit (0 if not here);
//      e = exp(l - m_t) kept in place of the logits; stats [C, 3] = (m_t, s_t, z_t).
//   2. The caller gathers the T ranks' stats in rank order ([T C, 3]: rank t's rows at t C).
//      cross_entropy_shard_combine: m = max_t m_t, Z = sum_t s_t exp(m_t - m),
//        loss_i = m + log Z - sum_t z_t  (the same on every rank: the same sums in rank order),
//        factor_i = grad_scale exp(m_t - m) / Z  for this rank's e.
//   3. cross_entropy_shard_grad: dlogits = e factor - grad_scale onehot(label)  (in place).
// Rows labelled kIgnoreLabel have no loss and a zero gradient. One exp per logit, as the fused
// kernel. A team of kRowTeam threads per row (row_layout.hpp: one thread on the host, thread j of
// a GPU team on columns j, j + kRowTeam, ...), its max and sums combined in team scratch.
#pragma once

#include <Kokkos_Core.hpp>
#include <type_traits>

#include "compat.hpp"
#include "row_layout.hpp"
#include "tile_ops.hpp"
#include "types.hpp"

namespace minilst::kernels {

// Per-row statistics of one shard: [C, 3] = (max, sum of exp(l - max), the label's logit).
template <class T>
using ShardStats = Mat<accum_t<T>>;

// logits [C, Vt] := e = exp(logits - m_t); stats [C, 3] := (m_t, s_t, z_t); labels [C] (global ids).
template <class T>
void cross_entropy_shard_stats(const Mat<T>& logits, const ShardStats<T>& stats, const Vec<const std::int64_t>& labels,
                               std::int64_t v0) {
  using A = accum_t<T>;
  const int V = static_cast<int>(logits.extent(1));
  Kokkos::parallel_for("cross_entropy_shard_stats", row_teams(logits.extent(0)), KOKKOS_LAMBDA(const RowTeam& team) {
    const int i = team.league_rank(), t0 = team.team_rank();
    T* row = &logits(i, 0);
    const std::int64_t label = labels(i);
    const bool here = label != kIgnoreLabel && label >= v0 && label < v0 + V;
    A* slot = team_slots<A>(team);
    const A target = here ? A(row[label - v0]) : A(0);  // read before any thread writes
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
    if (t0 == 0) {
      stats(i, 0) = mx;
      stats(i, 1) = sum;
      stats(i, 2) = target;
    }
  });
}

// gathered [T C, 3]: every rank's stats in rank order; factor [C] := this rank's (t) factor.
// Returns sum_i loss_i over the rows not ignored (unscaled, as cross_entropy_fused) among rows
// [counted_begin, counted_end) (all when counted_end < 0: with sequence parallelism inside the
// group each rank counts the rows it owns, so the ranks' sums add up to the whole loss once).
template <class A>
double cross_entropy_shard_combine(const Mat<const A>& gathered, int T, int t, const Vec<const std::int64_t>& labels,
                                   const Vec<A>& factor, double grad_scale, std::int64_t counted_begin = 0,
                                   std::int64_t counted_end = -1) {
  const std::int64_t C = labels.extent(0), c0 = counted_begin, c1 = counted_end < 0 ? C : counted_end;
  double loss_sum = 0;
  Kokkos::parallel_reduce("cross_entropy_shard_combine", Kokkos::RangePolicy<ExecSpace>(0, C),
      KOKKOS_LAMBDA(const std::int64_t i, double& acc) {
        if (labels(i) == kIgnoreLabel) {
          factor(i) = A(0);
          return;
        }
        A m = gathered(i, 0);
        for (int r = 1; r < T; ++r) m = gathered(r * C + i, 0) > m ? gathered(r * C + i, 0) : m;
        A Z = 0, target = 0;
        for (int r = 0; r < T; ++r) {
          Z += gathered(r * C + i, 1) * tile::exp(gathered(r * C + i, 0) - m);
          target += gathered(r * C + i, 2);
        }
        factor(i) = A(grad_scale) * tile::exp(gathered(t * C + i, 0) - m) / Z;
        if (i >= c0 && i < c1) acc += double(m + compat::log(Z) - target);
      },
      loss_sum);
  return loss_sum;
}

// e [C, Vt] (from cross_entropy_shard_stats) := dlogits of this shard; stats: this rank's own.
template <class T>
void cross_entropy_shard_grad(const Mat<T>& e, const ShardStats<T>& stats, const Vec<const accum_t<T>>& factor,
                              const Vec<const std::int64_t>& labels, std::int64_t v0, double grad_scale) {
  using A = accum_t<T>;
  const int V = static_cast<int>(e.extent(1));
  Kokkos::parallel_for("cross_entropy_shard_grad", row_teams(e.extent(0)), KOKKOS_LAMBDA(const RowTeam& team) {
    const int i = team.league_rank(), t0 = team.team_rank();
    T* row = &e(i, 0);
    const std::int64_t label = labels(i);
    const A f = factor(i), g = A(grad_scale);  // f: 0 on ignored rows
    const A p_label = tile::exp(stats(i, 2) - stats(i, 0)) * f;  // (the label's, where it is here)
    for (int c = t0; c < V; c += kRowTeam) row[c] = T(A(row[c]) * f);
    team.team_barrier();
    if (t0 == 0 && label != kIgnoreLabel && label >= v0 && label < v0 + V) {
      // (every captured name read above: a device lambda may not capture first in an if constexpr)
      if constexpr (std::is_same<T, A>::value) {
        row[label - v0] = T(A(row[label - v0]) - g);
      } else {  // bf16: p_label - 1 cancels, so from the fp32 probability, rounded once
        row[label - v0] = T(p_label - g);
      }
    }
  });
}

}  // namespace minilst::kernels
