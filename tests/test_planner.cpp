// The memory plan (memory.planner: plan):
//  - the planner: lower bound, greedy and exact plans are valid (no two live
//    buffers overlap) and no smaller than the bound; on a hand-made trace the
//    exact solver reaches the bound where greedy does not; exact never loses to
//    greedy on random small traces; the bi-level plan is valid;
//  - the step arena: after a recorded step, later steps allocate nothing and give
//    the same loss and gradients as per-buffer allocation, for every policy; a
//    step whose requests change is recorded and planned again.
#include <gtest/gtest.h>

#include <random>

#include "memory/planner.hpp"
#include "memory/step_arena.hpp"
#include "model/trainer.hpp"
#include "test_util.hpp"

using namespace minilst;
using minilst::test::host;
using minilst::test::iota;
using minilst::test::rel_err;
using minilst::test::tiny_config;
using minilst::test::train_options;

namespace {

std::vector<PlanItem> random_trace(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int> size(1, 8), start(0, 3 * n), length(1, n);
  std::vector<PlanItem> items;
  for (int i = 0; i < n; ++i) {
    const std::int64_t b = start(rng);
    items.push_back({std::uint64_t(size(rng)) * 64, b, b + length(rng)});
  }
  return items;
}

}  // namespace

TEST(Planner, LowerBoundIsTheLargestLiveSum) {
  const std::vector<PlanItem> items = {{100, 0, 2}, {50, 1, 3}, {30, 2, 4}, {7, 3, 4}};
  EXPECT_EQ(plan_lower_bound(items), 150u) << "at t = 1: 100 + 50";
  EXPECT_EQ(plan_lower_bound({{10, 0, 1}, {10, 1, 2}}), 10u) << "[begin, end): a buffer freed at t frees its bytes at t";
}

TEST(Planner, GreedyAndExactPlansAreValidAndAboveTheBound) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    const auto items = random_trace(rng, 4 + trial % 9);
    const auto lb = plan_lower_bound(items);
    const auto g = plan_greedy(items);
    ASSERT_TRUE(plan_is_valid(items, g)) << "greedy, trial " << trial;
    EXPECT_GE(g.peak, lb);
    const auto e = plan_exact(items, 5.0);
    ASSERT_TRUE(plan_is_valid(items, e)) << "exact, trial " << trial;
    EXPECT_GE(e.peak, lb);
    EXPECT_LE(e.peak, g.peak) << "exact never loses to greedy, trial " << trial;
  }
}

TEST(Planner, ExactReachesTheBoundWhereGreedyDoesNot) {
  // A [0,2) and D [3,5) of 2 units, B [1,3) and C [2,4) of 1 unit: live bytes never exceed 3,
  // but largest-first greedy puts A and D both at the bottom, then B above A and C above B: 4.
  const std::uint64_t u = 256;
  const std::vector<PlanItem> items = {{2 * u, 0, 2}, {u, 1, 3}, {u, 2, 4}, {2 * u, 3, 5}};
  const auto lb = plan_lower_bound(items);
  EXPECT_EQ(lb, 3 * u);
  const auto g = plan_greedy(items);
  EXPECT_EQ(g.peak, 4 * u) << "greedy misses the bound on this trace";
  ASSERT_TRUE(exact_solver_available()) << "GLPK (libglpk-dev) is part of the build";
  const auto e = plan_exact(items, 5.0);
  EXPECT_TRUE(plan_is_valid(items, e));
  EXPECT_EQ(e.peak, lb) << "the exact solver reaches the bound";
  EXPECT_TRUE(e.optimal);
}

TEST(Planner, BiLevelPlanOfLayerBlocksIsValid) {
  // Two "layers", each allocating two locals inside its segment and one buffer that lives on.
  std::vector<TraceBuffer> b;
  std::vector<TraceSegment> seg;
  std::int64_t t = 0;
  for (int l = 0; l < 2; ++l) {
    const std::int64_t s0 = t++;
    b.push_back({"L" + std::to_string(l) + "/saved", 1000, t++, 100, -1});
    b.push_back({"L" + std::to_string(l) + "/a", 300, t, t + 3, int(seg.size())});
    ++t;
    b.push_back({"L" + std::to_string(l) + "/b", 500, t, t + 1, int(seg.size())});
    t += 3;
    seg.push_back({"fwd", s0, t++});
  }
  for (auto solver : {PlanSolver::greedy, PlanSolver::exact}) {
    const auto p = plan_step(b, seg, solver, 256);
    std::vector<PlanItem> items;
    for (const auto& x : b) items.push_back({(x.bytes + 255) / 256 * 256, x.begin, x.end});
    EXPECT_TRUE(plan_is_valid(items, Placement{p.offsets, p.arena_bytes, false})) << p.method;
    EXPECT_GE(p.arena_bytes, p.lower_bound_bytes);
    for (auto o : p.offsets) EXPECT_EQ(o % 256, 0u) << "aligned offsets";
  }
}

namespace {
struct Run {
  double loss = 0;
  std::vector<double> grads;
  std::vector<std::uint64_t> allocations;  // per step
  std::vector<std::uint64_t> arena_before;  // the arena's bytes as each step begins
};

// forget: drop the plan between steps where alpha changes, as alpha auto does.
Run steps(const ModelOptions& o, bool plan, int n_steps, const std::vector<double>& alpha_per_step = {},
          bool forget = false) {
  auto& arena = StepArena::instance();
  arena.configure(plan, PlanSolver::greedy);
  Run r;
  {
    const auto cfg = tiny_config(3);
    Trainer<double> t(cfg, o, train_options(), iota(19), nullptr);
    const std::vector<Batch> batches = {synthetic_batch(cfg.vocab, 19, 3, 0, 0), synthetic_batch(cfg.vocab, 19, 3, 0, 1)};
    for (int s = 0; s < n_steps; ++s) {
      if (s < int(alpha_per_step.size())) {
        if (forget && alpha_per_step[s] != t.activations().alpha()) arena.forget_plan();
        t.activations().set_alpha(alpha_per_step[s]);
      }
      r.arena_before.push_back(arena.arena_bytes());
      arena.begin_step();
      r.loss = t.compute_gradients(batches);
      arena.end_step();
      r.allocations.push_back(arena.allocations_in_step());
    }
    r.grads = host(t.grads().flat());
  }
  arena.reset();
  return r;
}
}  // namespace

TEST(StepArena, LaterStepsAllocateNothingAndChangeNothing) {
  for (auto p : {MemoryPolicy::full, MemoryPolicy::checkpoint, MemoryPolicy::checkpoint_offload, MemoryPolicy::offload,
                 MemoryPolicy::vanilla, MemoryPolicy::hf_checkpoint}) {
    ModelOptions o;
    o.policy = p;
    o.offload.alpha = 0.37;
    o.mlp_chunks = store_buffers(p, 2).whole_sequence ? 1 : 3;
    const auto without = steps(o, false, 3), with = steps(o, true, 3);
    EXPECT_GT(with.allocations[0], 0u) << "the recorded step allocates";
    EXPECT_EQ(with.allocations[1], 0u) << "policy " << int(p);
    EXPECT_EQ(with.allocations[2], 0u) << "policy " << int(p);
    EXPECT_GT(without.allocations[2], 0u) << "without a plan every step allocates";
    EXPECT_NEAR(with.loss, without.loss, 1e-13 * std::abs(without.loss)) << "policy " << int(p);
    EXPECT_LT(rel_err(with.grads, without.grads), 1e-13) << "policy " << int(p);
  }
}

TEST(StepArena, ChangedRequestsAreRecordedAndPlannedAgain) {
  ModelOptions o;
  o.policy = MemoryPolicy::offload;
  // alpha 1, then 0.37 (token rows now recomputed: a new workspace request), then the same again
  const auto r = steps(o, true, 4, {1.0, 0.37, 0.37, 0.37});
  EXPECT_EQ(r.allocations[1] > 0, true) << "the step whose requests changed allocates";
  EXPECT_EQ(r.allocations[2], 0u) << "and is planned again";
  EXPECT_EQ(r.allocations[3], 0u);
}

TEST(StepArena, AForgottenPlanIsRecordedAfreshWithoutTheOldArena) {
  ModelOptions o;
  o.policy = MemoryPolicy::offload;
  // alpha 1, then 0.37 with the plan dropped between the steps (alpha auto's way)
  const auto r = steps(o, true, 4, {1.0, 0.37, 0.37, 0.37}, true);
  const auto fresh = steps(o, true, 2, {0.37});             // a run at 0.37 from its start
  const auto without = steps(o, false, 4, {1.0, 0.37, 0.37, 0.37});
  ASSERT_EQ(r.allocations.size(), 4u);
  EXPECT_EQ(r.arena_before[1], 0u) << "step 0's arena is gone before step 1";
  EXPECT_EQ(r.allocations[1], without.allocations[1]) << "step 1 allocates every buffer, as without a plan";
  EXPECT_EQ(r.arena_before[2], fresh.arena_before[1]) << "and is planned as one";
  EXPECT_EQ(r.allocations[2], 0u);
  EXPECT_EQ(r.allocations[3], 0u);
  EXPECT_NEAR(r.loss, without.loss, 1e-13 * std::abs(without.loss));
  EXPECT_LT(rel_err(r.grads, without.grads), 1e-13);
  auto& arena = StepArena::instance();
  arena.configure(true, PlanSolver::greedy);
  arena.begin_step();
  EXPECT_THROW(arena.forget_plan(), std::logic_error) << "only between steps";
  arena.end_step();
  arena.reset();
}
