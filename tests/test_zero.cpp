// ZeRO stages 0-3, with and without optimizer offload, run under mpiexec -n 1, 2, 3
// and 4 (ctest test_zero_np*; one rank: what it allows, stage 2 with offload): on data-parallel, Ulysses, ring and hybrid layouts
// (3 ranks: shards that divide nothing, odd sizes), two training steps must give
// the single-rank float64 loss, gradients and updated weights to 1e-10 relative;
// every memory category's high-water equals the memory model to the byte; at stage
// 3 the model states are the replicated bytes over P plus padding and the two
// gathered buffers, exactly; the bytes sent equal the analytic volume per operation.
// bf16 on a sharded layout stays within the stated tolerance of float64.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "attention/strategy_factory.hpp"
#include "io/deck.hpp"  // kBf16LossTolerance
#include "kernels/bf16.hpp"
#include "predict/comm_model.hpp"
#include "predict/memory_model.hpp"
#include "model/step_reduce.hpp"
#include "parallel/parallel_setup.hpp"
#include "test_util.hpp"

using namespace minilst;
using minilst::test::rel_err;
using minilst::test::world_size;

namespace {

struct Case {
  std::string name;
  ParallelConfig par;
  ModelOptions opts;
  std::int64_t seq_len = 37;
  int grad_accum = 1, layers = 2;
};

ModelConfig model_of(const Case& c) {
  ModelConfig m;
  m.hidden = 24;  // unit sizes no rank count divides
  m.heads = 4;
  m.kv_heads = 2;
  m.layers = c.layers;
  m.intermediate = 19;
  m.vocab = 23;
  return m;
}

TrainOptions train(double init_std) {
  TrainOptions t;
  t.seed = 11;
  t.init_std = init_std;
  t.norm_init_noise = 0.1;
  t.adamw.lr = 1e-2;  // steps large enough that a wrong update shows
  return t;
}

std::vector<Batch> sequences(const Case& c, int replica, long step) {
  std::vector<Batch> out;
  for (int m = 0; m < c.grad_accum; ++m)
    out.push_back(synthetic_batch(23, c.seq_len, 3, step, replica * c.grad_accum + m));
  return out;
}

struct Result {
  std::vector<double> losses, grads, weights;  // losses of both steps; step 1's gradient; weights after step 2
};

// One rank, every replica's sequences as micro-batches, replicated states.
template <class T>
Result reference(const Case& c, int replicas, double init_std) {
  Trainer<T> t(model_of(c), ModelOptions{}, train(init_std), minilst::test::iota(c.seq_len), nullptr);
  Result r;
  for (long step = 0; step < 2; ++step) {
    std::vector<Batch> all;
    for (int d = 0; d < replicas; ++d)
      for (auto& b : sequences(c, d, step)) all.push_back(b);
    r.losses.push_back(t.compute_gradients(all));
    t.reduce_gradients();
    if (step == 0) r.grads = t.states().gathered_gradients();
    t.apply_optimizer();
  }
  r.weights = t.states().gathered_weights();
  return r;
}

template <class T> constexpr Precision precision_of();
template <> constexpr Precision precision_of<double>() { return Precision::float64; }
template <> constexpr Precision precision_of<bf16>() { return Precision::bf16; }

template <class T>
void check(const Case& c, const ZeroOptions& zero) {
  constexpr Precision P = precision_of<T>();
  const int world = world_size();
  const auto cfg = model_of(c);
  const std::string name = c.name + ", ZeRO " + std::to_string(zero.stage) +
                           (zero.optimizer_offload ? " + offload" : "") + " (" + name_of(P) + ")";
  ASSERT_EQ(check_parallel(cfg, c.par, c.seq_len, world), "") << name;
  ParallelSetup setup(MPI_COMM_WORLD, c.par, c.seq_len);
  auto& tracker = MemoryTracker::instance();
  ASSERT_EQ(tracker.device_current(), 0u) << name << ": nothing left from earlier cases";
  tracker.reset_high_water();
  const double init_std = P == Precision::bf16 ? 0.02 : 0.3;
  const auto geometry = attention_geometry(cfg, c.par, setup.layout(), setup.sp_rank());
  Result got;
  CommBytes sent{};
  {
    Trainer<T> t(cfg, c.opts, train(init_std), setup.local_positions(), nullptr,
                 make_attention_factory<T>(geometry, setup, c.opts.kernels, nullptr), zero, &setup.world());
    for (long step = 0; step < 2; ++step) {
      setup.take_comm_bytes();
      const double local = t.compute_gradients(setup.shard(sequences(c, setup.dp_index(), step)), 1.0 / setup.dp_size());
      got.losses.push_back(reduce_step(t, setup, local, nullptr));
      t.grad_norm();
      auto bytes = setup.take_comm_bytes();
      if (step == 0) {
        got.grads = t.states().gathered_gradients();
        EXPECT_EQ(t.states().gathered_gradients(5), got.grads) << name << ": gathered in pieces of 5 elements";
      }
      setup.take_comm_bytes();  // the test's own gathers
      t.apply_optimizer();
      const CommBytes optimizer = setup.take_comm_bytes();
      for (const CommOp op : all_of<CommOp>()) bytes[op] += optimizer[op];
      if (step == 0) sent = bytes;
    }
    got.weights = t.states().gathered_weights();
    EXPECT_EQ(t.states().gathered_weights(3), got.weights) << name << ": gathered in pieces of 3 elements";
    // Memory: every category's high-water equals the model's, to the byte.
    const auto predicted = predict_rank_memory(cfg, c.opts, c.par, setup.layout(), setup.sp_rank(), c.grad_accum, P,
                                               c.opts.offload.alpha, zero);
    for (int k = 0; k < kNumMemCategories; ++k)
      EXPECT_EQ(tracker.high_water(MemCategory(k)), predicted.bytes.at(category_name(MemCategory(k))))
          << name << ": " << category_name(MemCategory(k)) << " high-water";
    EXPECT_EQ(tracker.device_high_water(), predicted.bytes.at("device_total")) << name << ": device_total";
    // Stage 3: replicated / P plus padding plus the two gathered units and buckets, from the layout alone.
    const auto sl = t.states().layout();
    const std::size_t n = parameter_count(cfg), W = sizeof(T), G = sizeof(master_t<T>);
    EXPECT_LT(sl.shard_total * std::size_t(sl.ranks) - n,
              sl.units.size() * std::size_t(sl.ranks) * ShardLayout::kShardAlign) << name << ": padding bound";
    if (zero.stage == 3) {
      const std::size_t master = (std::is_same<T, bf16>::value || zero.optimizer_offload) ? 1 : 0;
      const std::size_t device_optimizer = zero.optimizer_offload ? 0 : (2 + master) * G * sl.shard_total;
      const std::size_t states = tracker.high_water(MemCategory::weights) + tracker.high_water(MemCategory::gradients) +
                                 tracker.high_water(MemCategory::optimizer);
      const std::size_t grads = zero.optimizer_offload ? 0 : G * sl.shard_total;
      EXPECT_EQ(states, W * sl.shard_total + grads + device_optimizer + 2 * (W + G) * sl.max_padded_unit) << name;
      if (zero.optimizer_offload)
        EXPECT_EQ(tracker.high_water(MemCategory::host_optimizer),
                  (4 * G + W) * sl.shard_total + 2 * G * sl.max_shard) << name << ": host states";
    }
  }
  // Communication: the analytic volume, operation by operation (step 1).
  const auto model = predict_comm_bytes(cfg, c.opts, c.par, setup.layout(), setup.sp_rank(), world, c.grad_accum, P, zero);
  for (const CommOp op : all_of<CommOp>())  // every operation: sent and modelled alike
    EXPECT_EQ(sent[op], model[op]) << name << ": " << name_of(op) << " bytes";

  const auto ref = reference<double>(c, setup.dp_size(), init_std);
  const double tol = P == Precision::float64 ? 1e-10 : kBf16LossTolerance;
  for (int s = 0; s < 2; ++s) EXPECT_NEAR(got.losses[s], ref.losses[s], tol * std::abs(ref.losses[s])) << name << " step " << s + 1;
  const double grad_err = rel_err(got.grads, ref.grads), weight_err = rel_err(got.weights, ref.weights);
  EXPECT_LT(grad_err, P == Precision::float64 ? 1e-10 : 5e-2) << name << ": gradients";
  EXPECT_LT(weight_err, P == Precision::float64 ? 1e-10 : 1e-2) << name << ": weights after two steps";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    std::printf("  %-60s loss %.12f  grad err %.1e  weight err %.1e\n", name.c_str(), got.losses[1], grad_err,
                weight_err);
}

Case make(std::string name, int U, int R) {
  Case c;
  c.name = std::move(name);
  c.par.ulysses = U;
  c.par.ring = R;
  return c;
}

// The layouts of this world size: data parallel always; Ulysses, ring, hybrid where they divide it.
std::vector<Case> cases() {
  const int n = world_size();
  std::vector<Case> out;
  auto dp = make("data parallel x" + std::to_string(n) + ", grad_accum 2", 1, 1);
  dp.grad_accum = 2;
  out.push_back(dp);
  if (n % 2 == 0) {
    auto u = make("ulysses 2, L=3, checkpoint", 2, 1);
    u.layers = 3;
    u.opts.policy = MemoryPolicy::checkpoint;
    out.push_back(u);
    auto r = make("ring 2 zigzag, offload alpha 0.37, chunks 2/3", 1, 2);
    r.opts.policy = MemoryPolicy::offload;
    r.opts.offload.alpha = 0.37;
    r.opts.mlp_chunks = 2;
    r.opts.lm_head_chunks = 3;
    out.push_back(r);
  }
  if (n == 3) out.push_back(make("ulysses 1 x ring 3, S=41 (contiguous)", 1, 3));
  if (n % 4 == 0) {
    auto h = make("hybrid 2 ulysses x 2 ring, L=1", 2, 2);
    h.layers = 1;
    out.push_back(h);
  }
  for (auto& c : out)
    if (c.name.find("ring 3") != std::string::npos) {
      c.seq_len = 41;
      c.par.layout = RingLayout::contiguous;
    }
  return out;
}

}  // namespace

TEST(Zero, EveryStageWithAndWithoutOffloadReproducesTheSingleRankSteps) {
  for (const auto& c : cases())
    for (int stage = 0; stage <= 3; ++stage)
      for (bool offload : {false, true}) {
        ParallelConfig par = c.par;
        par.zero = stage;
        if (check_zero(par, world_size(), offload).empty()) check<double>(c, ZeroOptions{stage, offload, world_size()});
      }
}

TEST(Zero, Bf16ShardedWithinTheStatedTolerance) {
  const auto c = cases().back();
  const int stage = world_size() > 1 ? 3 : 2;  // one rank: stage 2 with offload, the one-device setting
  for (bool offload : {false, true})
    if (world_size() > 1 || offload) check<bf16>(c, ZeroOptions{stage, offload, world_size()});
}

TEST(Zero, ShardLayoutCoversEveryParameterOnce) {
  const auto cfg = model_of(make("", 1, 1));
  for (int P : {1, 2, 3, 5, 8}) {
    const auto sl = shard_layout(cfg, P, true);
    std::size_t covered = 0;
    for (std::size_t u = 0; u < sl.units.size(); ++u) {
      const auto& unit = sl.units[u];
      EXPECT_EQ(unit.shard % ShardLayout::kShardAlign, 0u);
      EXPECT_GE(unit.shard * std::size_t(P), unit.count);
      EXPECT_LT(unit.shard * std::size_t(P), unit.count + std::size_t(P) * ShardLayout::kShardAlign);
      EXPECT_EQ(unit.begin, covered) << "units are contiguous, in order";
      covered += unit.count;
    }
    EXPECT_EQ(covered, parameter_count(cfg));
    EXPECT_EQ(sl.padded_total, sl.shard_total * std::size_t(P));
  }
  const auto order = unit_gather_order(3);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 2, 1})) << "embedding, layers, head; the last layer kept";
  EXPECT_EQ(unit_gather_order(3, false), (std::vector<int>{0, 2, 3, 4, 2, 1})) << "later micro-steps keep layer 0";
}

TEST(Zero, OneRankIsRefusedWithTheFix) {
  ParallelConfig p;
  for (int stage : {1, 2, 3}) {
    p.zero = stage;
    EXPECT_NE(check_zero(p, 1, false).find("parallel.zero = " + std::to_string(stage) + " on 1 rank"),
              std::string::npos);
    EXPECT_EQ(check_zero(p, 1, true).empty(), stage == 2) << "one device: stage 2 with optimizer offload only";
    EXPECT_EQ(check_zero(p, 2, false), "");
  }
}
