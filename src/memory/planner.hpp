// Static memory planning: offline dynamic storage allocation (DSA). Buffers with
// sizes and lifetimes [begin, end) in a step's allocation sequence get offsets in
// one arena such that no two buffers alive at the same time overlap, and the
// arena (the peak) is as small as possible.
//   lower_bound   the largest sum of simultaneously live bytes (no plan does better)
//   greedy        largest buffer first, each at the best-fitting free gap among the
//                 buffers it overlaps in time (fast; the default)
//   exact         MEMO's mixed-integer formulation, solved by GLPK: offsets o_i >= 0,
//                 arena >= o_i + s_i, and for each pair alive together a binary z_ij:
//                 o_i + s_i <= o_j + M z_ij,  o_j + s_j <= o_i + M (1 - z_ij); minimise the
//                 arena (small traces; where GLPK was not found at build time, greedy)
// Bi-level (MEMO section 4.2): the buffers a layer's forward (or backward) allocates
// and frees within itself are planned once per distinct layer block; the step is
// then planned with each block as one buffer alive for the whole layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/names.hpp"

namespace minilst {

struct PlanItem {
  std::uint64_t bytes = 0;
  std::int64_t begin = 0, end = 0;  // alive in [begin, end) of the event sequence
};

struct Placement {
  std::vector<std::uint64_t> offsets;  // per item
  std::uint64_t peak = 0;              // the arena size
  bool optimal = false;                // exact solver: proven optimal
};

enum class PlanSolver { greedy, exact };
template <>
struct EnumNames<PlanSolver> {
  static constexpr std::array<std::pair<PlanSolver, const char*>, 2> table{
      {{PlanSolver::greedy, "greedy"}, {PlanSolver::exact, "exact"}}};
};
constexpr std::uint64_t kArenaAlignment = 256;  // every arena buffer starts on a 256-byte boundary

std::uint64_t plan_lower_bound(const std::vector<PlanItem>& items);
Placement plan_greedy(const std::vector<PlanItem>& items);
// Exact within a time limit (falls back to greedy where it finds nothing better or GLPK is absent).
Placement plan_exact(const std::vector<PlanItem>& items, double time_limit_s);
bool exact_solver_available();
// Whether two placed items collide (overlap in time and in space): the check every plan passes.
bool plan_is_valid(const std::vector<PlanItem>& items, const Placement& p);

// A step's recorded requests, with the layer segments they were made in.
struct TraceBuffer {
  std::string key;           // stable across steps: scope/label (e.g. "L3.fwd/mlp_gate")
  std::uint64_t bytes = 0;
  std::int64_t begin = 0, end = 0;
  int segment = -1;          // the segment it was allocated and freed in (-1: crosses segments)
};
struct TraceSegment {
  std::string kind;          // "fwd" | "bwd": layers of one kind are alike
  std::int64_t begin = 0, end = 0;
};
struct ArenaPlan {
  std::vector<std::uint64_t> offsets;  // per buffer
  std::uint64_t arena_bytes = 0, lower_bound_bytes = 0;
  std::string method;                  // "bi-level greedy", "flat exact", ...
};
// Plans a step bi-level and flat with the solver, keeps the smaller arena.
// Offsets are multiples of `alignment`.
ArenaPlan plan_step(const std::vector<TraceBuffer>& buffers, const std::vector<TraceSegment>& segments,
                   PlanSolver solver, std::uint64_t alignment);

}  // namespace minilst
