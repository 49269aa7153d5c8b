// Masked multi-head attention, flash style: tiles of queries and keys, a running
// max and log-sum-exp per query row, never an [Sq, Sk] score matrix.
//   Sq query tokens, Sk key tokens, Hq query heads, Gk kv heads, h head dim.
//   q: [Sq, Hq*h]  k, v: [Sk, Gk*h]  o: [Sq, Hq*h]  lse: [Sq, Hq]  (accum type)
//   q_pos, q_lo: [Sq], k_pos: [Sk] global positions; key j is visible to query i iff
//     q_lo[i] <= k_pos[j] <= q_pos[i]
//   (q_lo[i]: the first position query i may see: its document's start, or its sliding
//   window's; q_lo empty (extent 0): 0 for every query, plain causal attention). Masks
//   compare positions, so any sequence layout (contiguous, zigzag, a visiting ring
//   block) is masked correctly. Query head n reads kv head n / (Hq/Gk) (GQA).
//
// forward (=):  o_i = sum_j softmax_j(q_i.k_j / sqrt(h)) v_j,  lse_i = log sum_j e^(q_i.k_j/sqrt(h))
//               (j over the keys visible to i); a row with no visible key gets o_i = 0,
//               lse_i = -inf (a ring block may be all masked).
// backward (+=, with the o and lse of the *whole* attention, so blocks simply add up):
//   D_i = rowsum(dO_i * O_i);  P_ij = exp(q_i.k_j/sqrt(h) - lse_i) (0 where j is masked)
//   dV_j += sum_i P_ij dO_i ;  dS_ij = P_ij (dO_i.v_j - D_i)
//   dQ_i += sum_j dS_ij k_j / sqrt(h) ;  dK_j += sum_i dS_ij q_i / sqrt(h)
//
// Tiles (tile_ops.hpp): a query block is R rows of each of the `group` = Hq/Gk query
// heads that share a kv head, stacked into one M = group x R row tile (M ~ 64), a
// key block is 64 keys. Score tiles, P V, and the backward's dV, dP, dK, dQ are tile
// products; the softmax runs on the tile. A key block is skipped when no query of the
// block can see any of its keys: its keys all follow the block's last query position,
// or all precede its smallest q_lo (causal: about half; a window or documents: most
// blocks far from the diagonal). A block needs no mask when every key lies in every
// query's interval: keys <= the smallest q_pos and >= the largest q_lo.
//   forward   a team per (kv head, query block): online softmax over the key blocks.
//   backward  FlashAttention-2 order, a team per kv head: for each key block (outer),
//             each query block (inner) recomputes its score tile once, adds to the
//             key block's dK, dV (kept in the team's scratch) and to its own dQ rows.
//             Every output element has one writer (the team of its kv head), in a
//             fixed order: deterministic, no atomics.
// Host backends run a team of one thread on tiles that stay in L1/L2; a GPU runs a
// team of threads per tile product, tiles in team scratch.
#pragma once

#include <limits>
#include <type_traits>

#include "attention_tiles.hpp"
#include "compat.hpp"
#include "tile_ops.hpp"
#include "types.hpp"

namespace minilst::kernels {

namespace detail {
// Dynamic scheduling: a team's work depends on its query block (causal: later blocks see more
// keys), so host threads take teams as they finish rather than in fixed contiguous shares.
using AttentionPolicy = Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
using TeamMember = AttentionPolicy::member_type;
template <class A>
using Scratch = Kokkos::View<A*, ExecSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;

constexpr bool kHost = Kokkos::SpaceAccessibility<Kokkos::HostSpace, ExecSpace::memory_space>::accessible;

// Teams of one on host backends (tiles stay in the core's caches); a warp's
// multiple on devices. Scratch: level 0 while it fits a GPU's shared memory as
// Kokkos offers it (the 48 KiB default less what Kokkos keeps for its team).
inline int scratch_level(std::size_t bytes) {
  return kHost || bytes <= std::size_t(AttentionPolicy::scratch_size_max(0)) ? 0 : 1;
}
inline AttentionPolicy attention_policy(int league, std::size_t scratch_bytes) {
  AttentionPolicy policy = kHost ? AttentionPolicy(league, 1) : AttentionPolicy(league, 128);
  return policy.set_scratch_size(scratch_level(scratch_bytes), Kokkos::PerTeam(scratch_bytes));
}

// Smallest and largest position of [b, b + n).
struct PosRange {
  std::int64_t lo, hi;
};
KOKKOS_INLINE_FUNCTION PosRange pos_range(const Vec<const std::int64_t>& pos, int b, int n) {
  PosRange r{pos(b), pos(b)};
  for (int t = 1; t < n; ++t) {
    const auto p = pos(b + t);
    r.lo = p < r.lo ? p : r.lo;
    r.hi = p > r.hi ? p : r.hi;
  }
  return r;
}
// The first visible position of query i: q_lo(i), or 0 when q_lo is empty (causal).
KOKKOS_INLINE_FUNCTION std::int64_t first_visible(const Vec<const std::int64_t>& q_lo, int i) {
  return q_lo.extent(0) > 0 ? q_lo(i) : std::int64_t(0);
}
KOKKOS_INLINE_FUNCTION PosRange lo_range(const Vec<const std::int64_t>& q_lo, int b, int n) {
  return q_lo.extent(0) > 0 ? pos_range(q_lo, b, n) : PosRange{0, 0};
}
// Whether no query of a block (positions qr, first visible positions ql) sees a key
// of kr: every key after the last query, or before the smallest first visible position.
KOKKOS_INLINE_FUNCTION bool nothing_visible(const PosRange& kr, const PosRange& qr, const PosRange& ql) {
  return kr.lo > qr.hi || kr.hi < ql.lo;
}
// Whether every key of kr is visible to every query of the block.
KOKKOS_INLINE_FUNCTION bool all_visible(const PosRange& kr, const PosRange& qr, const PosRange& ql) {
  return kr.hi <= qr.lo && kr.lo >= ql.hi;
}
}  // namespace detail

template <class T>
void attention_forward(const Mat<T>& o, const Mat<accum_t<T>>& lse, const Mat<const T>& q,
                       const Mat<const T>& k, const Mat<const T>& v, const Vec<const std::int64_t>& q_pos,
                       const Vec<const std::int64_t>& q_lo, const Vec<const std::int64_t>& k_pos, int head_dim) {
  using A = accum_t<T>;
  using namespace detail;
  const int Sq = int(q.extent(0)), Sk = int(k.extent(0));
  const int Hq = int(q.extent(1)) / head_dim, Gk = int(k.extent(1)) / head_dim;
  if (Sq == 0) return;
  const AttnTiles t(head_dim, Hq / Gk);
  const int h = t.h, hp = t.hp, group = t.group, R = t.R, M = t.M, Bk = t.Bk;
  const int n_qb = (Sq + R - 1) / R, n_kb = (Sk + Bk - 1) / Bk;
  const int ldk = int(k.extent(1));
  const bool direct = h % 16 == 0 && std::is_same<A, T>::value;  // K, V rows read in place
  const A scale = A(1) / compat::sqrt(A(h));
  const A neg_inf = -std::numeric_limits<A>::infinity();
  // The tile works on S^T [Bk, M] (keys x query rows), so that each query row's
  // softmax runs down a column and vectorises across rows, Q^T is packed once per
  // team, and K and V rows are read where they are (no per-tile transposition).
  // Q^T [h, M], S^T/P^T [Bk, M], O [M, hp], K, V [Bk, hp] (packed when not direct),
  // row max, row sum, new max, correction [M] each; query positions and first visible
  // positions [M] each (int64: exact at any S)
  const std::size_t n_scratch = std::size_t(h) * M + std::size_t(Bk) * M + std::size_t(M) * hp +
                                (direct ? 0 : 2 * std::size_t(Bk) * hp) + 4 * std::size_t(M);
  const std::size_t bytes = Scratch<A>::shmem_size(n_scratch) + 2 * Scratch<std::int64_t>::shmem_size(M);
  const int level = scratch_level(bytes);

  Kokkos::parallel_for("attention_forward", attention_policy(Gk * n_qb, bytes), KOKKOS_LAMBDA(const TeamMember& team) {
    const int g = team.league_rank() % Gk, qb = team.league_rank() / Gk;
    const int i0 = qb * R, nq = i0 + R < Sq ? R : Sq - i0;
    Scratch<A> mem(team.team_scratch(level), n_scratch);
    A* Qt = mem.data();
    A* St = Qt + h * M;
    A* Os = St + Bk * M;
    A* Ks = Os + M * hp;
    A* Vs = direct ? Ks : Ks + Bk * hp;
    A* mx = direct ? Ks : Vs + Bk * hp;
    A* sum = mx + M;
    A* m_new = sum + M;
    A* corr = m_new + M;
    Scratch<std::int64_t> qp(team.team_scratch(level), M), ql(team.team_scratch(level), M);
    const PosRange qr = pos_range(q_pos, i0, nq), qlr = lo_range(q_lo, i0, nq);
    // Column rho = e R + r: query i0 + r of head g group + e (padding: e >= group or r >= nq).
    tile::for_rows(team, M, [&](const int rho) {
      const int e = rho / R, r = rho % R;
      const bool valid = e < group && r < nq;
      for (int c = 0; c < h; ++c) Qt[c * M + rho] = valid ? scale * A(q(i0 + r, (g * group + e) * h + c)) : A(0);
      for (int c = 0; c < hp; ++c) Os[rho * hp + c] = A(0);
      mx[rho] = neg_inf;
      sum[rho] = A(0);
      qp(rho) = valid ? q_pos(i0 + r) : std::int64_t(-1);  // padding sees no key
      ql(rho) = valid ? first_visible(q_lo, i0 + r) : std::int64_t(0);
    });
    for (int kb = 0; kb < n_kb; ++kb) {
      const int j0 = kb * Bk, nk = j0 + Bk < Sk ? Bk : Sk - j0;
      const PosRange kr = pos_range(k_pos, j0, nk);
      if (nothing_visible(kr, qr, qlr)) continue;
      const bool unmasked = all_visible(kr, qr, qlr) && nq == R && group * R == M;
      const A* Kb = reinterpret_cast<const A*>(&k(j0, g * h));  // used when A is T (direct)
      const A* Vb = reinterpret_cast<const A*>(&v(j0, g * h));
      int ldb = ldk;
      if (!direct) {  // K and V of the block, zero-padded to hp columns
        tile::for_rows(team, nk, [&](const int tk) {
          for (int c = 0; c < hp; ++c) {
            Ks[tk * hp + c] = c < h ? A(k(j0 + tk, g * h + c)) : A(0);
            Vs[tk * hp + c] = c < h ? A(v(j0 + tk, g * h + c)) : A(0);
          }
        });
        Kb = Ks;
        Vb = Vs;
        ldb = hp;
      }
      tile::mm(team, nk, M, h, Kb, ldb, 1, Qt, M, St, M, false);  // S^T = K (scale Q)^T
      if (!unmasked)                                              // mask edges, padding
        tile::for_rows(team, nk, [&](const int tk) {
          const std::int64_t kp = k_pos(j0 + tk);
          A* s = St + tk * M;
          const std::int64_t* qpp = qp.data();
          const std::int64_t* qlp = ql.data();
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
          for (int rho = 0; rho < M; ++rho) s[rho] = kp <= qpp[rho] && kp >= qlp[rho] ? s[rho] : neg_inf;
        });
      // Online softmax, column by column (vectorised across the M query rows).
      tile::for_rows(team, 1, [&](const int) {
        for (int rho = 0; rho < M; ++rho) m_new[rho] = mx[rho];
        for (int tk = 0; tk < nk; ++tk) {
          const A* s = St + tk * M;
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
          for (int rho = 0; rho < M; ++rho) m_new[rho] = s[rho] > m_new[rho] ? s[rho] : m_new[rho];
        }
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
        for (int rho = 0; rho < M; ++rho) {
          // rows that see nothing yet keep m = -inf; exp(-inf - -inf) must not run
          const bool seen = m_new[rho] != neg_inf;
          corr[rho] = seen ? tile::exp(mx[rho] - m_new[rho]) : A(1);
          m_new[rho] = seen ? m_new[rho] : A(0);
          sum[rho] *= corr[rho];
        }
        for (int tk = 0; tk < nk; ++tk) {
          A* s = St + tk * M;
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
          for (int rho = 0; rho < M; ++rho) {
            const A pr = tile::exp(s[rho] - m_new[rho]);
            s[rho] = pr;
            sum[rho] += pr;
          }
        }
        for (int rho = 0; rho < M; ++rho) mx[rho] = mx[rho] == neg_inf && sum[rho] == A(0) ? neg_inf : m_new[rho];
      });
      tile::for_rows(team, M, [&](const int rho) {
        A* out = Os + rho * hp;
        const A cr = corr[rho];
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
        for (int c = 0; c < hp; ++c) out[c] *= cr;
      });
      tile::mm(team, M, hp, nk, St, 1, M, Vb, ldb, Os, hp, true);  // O += P V
    }
    tile::for_rows(team, M, [&](const int rho) {
      const int e = rho / R, r = rho % R;
      if (e >= group || r >= nq) return;
      const int n = g * group + e;
      const A inv = sum[rho] > A(0) ? A(1) / sum[rho] : A(0);
      for (int c = 0; c < h; ++c) o(i0 + r, n * h + c) = T(Os[rho * hp + c] * inv);
      lse(i0 + r, n) = sum[rho] > A(0) ? mx[rho] + compat::log(sum[rho]) : neg_inf;
    });
  });
}

template <class T>
void attention_backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv,
                        const Mat<accum_t<T>>& delta, const Mat<const T>& d_o,
                        const Mat<const T>& o, const Mat<const accum_t<T>>& lse,
                        const Mat<const T>& q, const Mat<const T>& k, const Mat<const T>& v,
                        const Vec<const std::int64_t>& q_pos, const Vec<const std::int64_t>& q_lo,
                        const Vec<const std::int64_t>& k_pos, int head_dim) {
  // delta: [Sq, Hq] workspace, overwritten with D_i.
  using A = accum_t<T>;
  using namespace detail;
  const int Sq = int(q.extent(0)), Sk = int(k.extent(0));
  const int Hq = int(q.extent(1)) / head_dim, Gk = int(k.extent(1)) / head_dim;
  if (Sq == 0 || Sk == 0) return;
  const AttnTiles t(head_dim, Hq / Gk);
  const int h = t.h, hp = t.hp, group = t.group, R = t.R, M = t.M, Bk = t.Bk;
  const int n_qb = (Sq + R - 1) / R, n_kb = (Sk + Bk - 1) / Bk;
  const A scale = A(1) / compat::sqrt(A(h));
  const A neg_inf = -std::numeric_limits<A>::infinity();

  Kokkos::parallel_for("attention_backward_delta",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {std::size_t(Sq), std::size_t(Hq)}),
      KOKKOS_LAMBDA(const int i, const int n) {
        A s = 0;
        for (int c = 0; c < h; ++c) s += A(d_o(i, n * h + c)) * A(o(i, n * h + c));
        delta(i, n) = s;
      });

  // K^T [h, Bk], K [Bk, hp], V^T [h, Bk], dK [Bk, hp], dV [Bk, hp];
  // Q [M, hp], dO [M, hp], P [M, Bk], dP/dS [M, Bk], dQ [M, hp], lse [M], D [M]; key positions [Bk]
  const std::size_t n_scratch = 2 * std::size_t(h) * Bk + 3 * std::size_t(Bk) * hp + 3 * std::size_t(M) * hp +
                                2 * std::size_t(M) * Bk + 2 * std::size_t(M);
  const std::size_t bytes = Scratch<A>::shmem_size(n_scratch) + Scratch<std::int64_t>::shmem_size(Bk);
  const int level = scratch_level(bytes);

  Kokkos::parallel_for("attention_backward", attention_policy(Gk, bytes), KOKKOS_LAMBDA(const TeamMember& team) {
    const int g = team.league_rank();
    Scratch<A> mem(team.team_scratch(level), n_scratch);
    A* Kt = mem.data();
    A* Kr = Kt + h * Bk;
    A* Vt = Kr + Bk * hp;
    A* dKs = Vt + h * Bk;
    A* dVs = dKs + Bk * hp;
    A* Qs = dVs + Bk * hp;
    A* dOs = Qs + M * hp;
    A* Ps = dOs + M * hp;
    A* dSs = Ps + M * Bk;
    A* dQs = dSs + M * Bk;
    A* lse_s = dQs + M * hp;
    A* D_s = lse_s + M;
    Scratch<std::int64_t> kp(team.team_scratch(level), Bk);
    for (int kb = 0; kb < n_kb; ++kb) {
      const int j0 = kb * Bk, nk = j0 + Bk < Sk ? Bk : Sk - j0;
      const PosRange kr = pos_range(k_pos, j0, nk);
      tile::for_rows(team, Bk, [&](const int tk) {  // K^T, K, V^T of the block; dK = dV = 0
        for (int c = 0; c < hp; ++c) {
          const bool in = tk < nk && c < h;
          const A kv = in ? A(k(j0 + tk, g * h + c)) : A(0);
          Kr[tk * hp + c] = kv;
          if (c < h) {
            Kt[c * Bk + tk] = kv;
            Vt[c * Bk + tk] = in ? A(v(j0 + tk, g * h + c)) : A(0);
          }
          dKs[tk * hp + c] = A(0);
          dVs[tk * hp + c] = A(0);
        }
        kp(tk) = tk < nk ? k_pos(j0 + tk) : std::int64_t(0);
      });
      for (int qb = 0; qb < n_qb; ++qb) {
        const int i0 = qb * R, nq = i0 + R < Sq ? R : Sq - i0;
        const PosRange qr = pos_range(q_pos, i0, nq), qlr = lo_range(q_lo, i0, nq);
        if (nothing_visible(kr, qr, qlr)) continue;
        const bool unmasked = all_visible(kr, qr, qlr);
        tile::for_rows(team, M, [&](const int rho) {  // Q (scaled), dO, lse, D of the block's rows
          const int e = rho / R, r = rho % R;
          const bool valid = e < group && r < nq;
          A* qs = Qs + rho * hp;
          A* dos = dOs + rho * hp;
          for (int c = 0; c < hp; ++c) qs[c] = dos[c] = A(0);
          lse_s[rho] = neg_inf;
          D_s[rho] = A(0);
          if (!valid) return;
          const int n = g * group + e;
          const T* qr = &q(i0 + r, n * h);
          const T* dor = &d_o(i0 + r, n * h);
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
          for (int c = 0; c < h; ++c) {
            qs[c] = scale * A(qr[c]);
            dos[c] = A(dor[c]);
          }
          lse_s[rho] = lse(i0 + r, n);
          D_s[rho] = delta(i0 + r, n);
        });
        tile::mm(team, M, Bk, h, Qs, hp, 1, Kt, Bk, Ps, Bk, false);    // S = (scale Q) K^T
        tile::for_rows(team, M, [&](const int rho) {                   // P = exp(S - lse), masked
          const int r = rho % R;
          A* p = Ps + rho * Bk;
          const A l = lse_s[rho];
          if (l == neg_inf) {  // padding, or a row that sees no key at all: no gradient
            for (int tk = 0; tk < Bk; ++tk) p[tk] = A(0);
            return;
          }
          if (!unmasked) {  // mask edges: the keys outside [q_lo, q_pos] of this query
            const std::int64_t pos = q_pos(i0 + r), lo = first_visible(q_lo, i0 + r);
            for (int tk = 0; tk < nk; ++tk) p[tk] = kp(tk) <= pos && kp(tk) >= lo ? p[tk] : neg_inf;
          }
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
          for (int tk = 0; tk < nk; ++tk) p[tk] = tile::exp(p[tk] - l);
          for (int tk = nk; tk < Bk; ++tk) p[tk] = A(0);
        });
        tile::mm(team, Bk, hp, M, Ps, 1, Bk, dOs, hp, dVs, hp, true);   // dV += P^T dO
        tile::mm(team, M, Bk, h, dOs, hp, 1, Vt, Bk, dSs, Bk, false);   // dP = dO V^T
        tile::for_rows(team, M, [&](const int rho) {                   // dS = P (dP - D)
          const A* p = Ps + rho * Bk;
          A* ds = dSs + rho * Bk;
          const A D = D_s[rho];
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
          for (int tk = 0; tk < Bk; ++tk) ds[tk] = p[tk] * (ds[tk] - D);
        });
        tile::mm(team, Bk, hp, M, dSs, 1, Bk, Qs, hp, dKs, hp, true);   // dK += dS^T (scale Q)
        tile::mm(team, M, hp, nk, dSs, Bk, 1, Kr, hp, dQs, hp, false);  // dQ tile = dS K
        tile::for_rows(team, M, [&](const int rho) {
          const int e = rho / R, r = rho % R;
          if (e >= group || r >= nq) return;
          T* dqr = &dq(i0 + r, (g * group + e) * h);
          const A* dqs = dQs + rho * hp;
#ifdef MINILST_HOST_SIMD
#pragma omp simd
#endif
          for (int c = 0; c < h; ++c) dqr[c] += scale * dqs[c];
        });
      }
      tile::for_rows(team, nk, [&](const int tk) {
        for (int c = 0; c < h; ++c) {
          dk(j0 + tk, g * h + c) += dKs[tk * hp + c];
          dv(j0 + tk, g * h + c) += dVs[tk * hp + c];
        }
      });
    }
  });
}

}  // namespace minilst::kernels
