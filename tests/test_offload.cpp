// Activation swapping (memory.policy checkpoint_offload and offload), in double:
//  - every policy (offload at alpha 0, 0.37, 1) gives full's loss and gradients to
//    1e-12, for L = 1..5 (the two device buffers wrap) and with 2 micro-steps;
//  - measured high-water of every category, host_offload included, equals the
//    analytic model byte for byte; with alpha 1 and L = 8 the device activations
//    are at most a third of full's; checkpoint_offload keeps two layer inputs;
//  - the second step of each run orders compute after the copies as the driver's
//    later steps do (ActivationStore::stop_timing_forward), and gives the same;
//  - the copy engine copies, in order, counts bytes and busy time, and a
//    bandwidth cap slows it to the cap; submit needs no fence before it,
//    order_compute_after and wait_all wait (host engine), both directions at once;
//  - MEMO's alpha: the time bound, the host bound and their minimum.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <numeric>
#include <vector>

#include "io/deck.hpp"
#include "memory/host_copy_engine.hpp"
#include "memory/offload_alpha.hpp"
#include "memory/offload_controller.hpp"
#include "model/memory_model.hpp"
#include "model/trainer.hpp"
#include "test_util.hpp"

using namespace minilst;
using minilst::test::host;
using minilst::test::iota;
using minilst::test::rel_err;
using minilst::test::tiny_config;
using minilst::test::train_options;

namespace {

constexpr std::int64_t kSeq = 19;  // alpha 0.37: round(7.03) = 7 of 19 tokens in host memory

ModelOptions policy(MemoryPolicy p, double alpha = 1.0) {
  ModelOptions o;
  o.policy = p;
  o.offload.alpha = alpha;
  return o;
}

struct Result {
  double loss;
  std::vector<double> grads;
};

Result run(const ModelConfig& cfg, const ModelOptions& opts, int micro_steps) {
  Trainer<double> t(cfg, opts, train_options(), iota(kSeq), nullptr);
  std::vector<Batch> batches;
  for (int m = 0; m < micro_steps; ++m) batches.push_back(synthetic_batch(cfg.vocab, kSeq, 3, 0, m));
  double loss = t.compute_gradients(batches);
  t.activations().stop_timing_forward();  // as after the driver's first step
  loss += t.compute_gradients(batches);  // a second step: buffers and host memory are reused
  return {loss, host(t.grads().flat())};
}

std::string describe(const ModelOptions& o) {
  return name_of(o.policy) + (o.policy == MemoryPolicy::offload ? " alpha " + std::to_string(o.offload.alpha) : "");
}

}  // namespace

TEST(Offload, EveryPolicyGivesFullLossAndGradients) {
  for (int L : {1, 2, 3, 5})
    for (int micro : {1, 2}) {
      const auto cfg = tiny_config(L);
      const auto ref = run(cfg, policy(MemoryPolicy::full), micro);
      for (const auto& o : {policy(MemoryPolicy::vanilla), policy(MemoryPolicy::checkpoint),
                            policy(MemoryPolicy::hf_checkpoint), policy(MemoryPolicy::checkpoint_offload),
                            policy(MemoryPolicy::offload, 0.0), policy(MemoryPolicy::offload, 0.37),
                            policy(MemoryPolicy::offload, 1.0)}) {
        const auto r = run(cfg, o, micro);
        const std::string where = describe(o) + ", L = " + std::to_string(L) + ", micro-steps " + std::to_string(micro);
        EXPECT_NEAR(r.loss, ref.loss, 1e-12 * std::abs(ref.loss)) << where;
        EXPECT_LT(rel_err(r.grads, ref.grads), 1e-12) << where;
      }
    }
}

TEST(Offload, AlphaMayChangeBetweenSteps) {  // alpha auto lowers it after the warm-up step
  // Every pair of steps is the reference's two; across 0 and > 0 the row buffers go 2 <-> 0 (transient).
  const auto cfg = tiny_config(4);
  const auto ref = run(cfg, policy(MemoryPolicy::full), 1);
  for (const auto& alphas : {std::vector<double>{1.0, 0.37}, std::vector<double>{1.0, 0.0},
                             std::vector<double>{0.0, 1.0}, std::vector<double>{0.0, 0.37}}) {
    Trainer<double> t(cfg, policy(MemoryPolicy::offload, alphas[0]), train_options(), iota(kSeq), nullptr);
    const std::vector<Batch> batch = {synthetic_batch(cfg.vocab, kSeq, 3, 0, 0)};
    double loss = t.compute_gradients(batch);
    t.activations().set_alpha(alphas[1]);
    loss += t.compute_gradients(batch);
    const std::string where = "alpha " + std::to_string(alphas[0]) + " then " + std::to_string(alphas[1]);
    EXPECT_EQ(t.activations().host_rows(), offload_host_rows(alphas[1], kSeq)) << where;
    EXPECT_EQ(t.activations().plan().row_buffers, alphas[1] > 0 ? 2 : 0) << where;
    EXPECT_NEAR(loss, ref.loss, 1e-12 * std::abs(ref.loss)) << where;
    EXPECT_LT(rel_err(host(t.grads().flat()), ref.grads), 1e-12) << where;
  }
}

// Measured against analytic, byte for byte, with the copies really made.
TEST(Offload, HighWaterOfEveryCategoryEqualsTheAnalyticModel) {
  struct Shape { int d, H, G, I, V; std::int64_t S; };
  for (const Shape sh : {Shape{24, 4, 2, 36, 29, 19}, Shape{16, 2, 1, 16, 500, 33}, Shape{16, 4, 4, 200, 20, 40}})
    for (int L : {1, 2, 3, 6})
      for (const auto& o0 : {policy(MemoryPolicy::checkpoint_offload), policy(MemoryPolicy::offload, 0.0),
                             policy(MemoryPolicy::offload, 0.37), policy(MemoryPolicy::offload, 1.0)})
        for (int m : {1, 3}) {
          ModelConfig cfg;
          cfg.hidden = sh.d; cfg.heads = sh.H; cfg.kv_heads = sh.G; cfg.intermediate = sh.I; cfg.vocab = sh.V;
          cfg.layers = L;
          auto o = o0;
          o.mlp_chunks = m;
          o.lm_head_chunks = m + 2;
          auto& tracker = MemoryTracker::instance();
          ASSERT_EQ(tracker.device_current(), 0u) << "nothing left from earlier tests";
          ASSERT_EQ(tracker.current(MemCategory::host_offload), 0u);
          tracker.reset_high_water();
          {
            Trainer<double> t(cfg, o, train_options(), iota(sh.S), nullptr);
            t.compute_gradients({synthetic_batch(sh.V, sh.S, 1, 0, 0)});
            EXPECT_EQ(tracker.current(MemCategory::activations), 0u) << "device buffers freed after the step";
          }
          const auto model = predict_memory(cfg, o, sh.S, Precision::float64);
          const std::string where = describe(o) + ", L = " + std::to_string(L) + ", S = " + std::to_string(sh.S) +
                                    ", chunks " + std::to_string(m);
          for (auto c : {MemCategory::weights, MemCategory::gradients, MemCategory::optimizer,
                         MemCategory::activations, MemCategory::workspace, MemCategory::host_offload})
            EXPECT_EQ(tracker.high_water(c), model.at(category_name(c))) << category_name(c) << ", " << where;
          EXPECT_EQ(tracker.device_high_water(), model.at("device_total")) << "device_total, " << where;
        }
}

TEST(Offload, DeviceKeepsTwoLayersWhateverL) {
  const auto cfg = tiny_config(8);
  const std::size_t S = kSeq, d = cfg.hidden, h = cfg.head_dim(), I = cfg.intermediate;
  const std::size_t X = S * d * sizeof(double);
  const std::size_t W = S * (cfg.heads * h + cfg.heads) * sizeof(double);          // whole: o, lse
  const std::size_t Q = S * (cfg.heads * h + 2 * cfg.kv_heads * h + d) * sizeof(double);  // rows: q, k, v, y
  const std::size_t M = S * (d + 3 * I) * sizeof(double);                          // rows: the MLP's
  auto high = [&](const ModelOptions& o) {
    auto& tracker = MemoryTracker::instance();
    tracker.reset_high_water();
    Trainer<double> t(cfg, o, train_options(), iota(S), nullptr);
    t.compute_gradients({synthetic_batch(cfg.vocab, S, 3, 0, 0)});
    return std::make_pair(tracker.high_water(MemCategory::activations), tracker.high_water(MemCategory::host_offload));
  };
  const auto full = high(policy(MemoryPolicy::full));
  EXPECT_EQ(full.first, 9 * X + 8 * (W + Q)) << "full: every layer's input and saved set";
  const auto off = high(policy(MemoryPolicy::offload, 1.0));
  std::printf("L = 8, alpha = 1: device activations %zu B (full: %zu B, ratio %.3f), host %zu B\n", off.first,
              full.first, double(off.first) / double(full.first), off.second);
  EXPECT_EQ(off.first, 2 * X + 2 * (W + Q + M)) << "two rounding buffers, the MLP's tensors in the swap set";
  EXPECT_EQ(off.second, 7 * X + 6 * (W + Q + M)) << "x of layers 0..L-2, the saved sets of layers 0..L-3 in host memory";
  const auto shapes = activation_shapes(cfg, S, {std::int64_t(S), cfg.heads});
  EXPECT_EQ(off.second, ActivationStore<double>::host_bytes(MemoryPolicy::offload, 8, shapes, 1.0));
  // alpha = 0 (MEMO): x, o and lse swapped, everything else recomputed into one transient row set.
  const auto off0 = high(policy(MemoryPolicy::offload, 0.0));
  EXPECT_EQ(off0.first, 2 * X + 2 * W + Q) << "alpha = 0: two rounding buffers of o, lse; one row set";
  EXPECT_EQ(off0.second, 7 * X + 6 * W);
  EXPECT_EQ(off0.second, ActivationStore<double>::host_bytes(MemoryPolicy::offload, 8, shapes, 0.0));
  const auto ckpt_off = high(policy(MemoryPolicy::checkpoint_offload));
  EXPECT_EQ(ckpt_off.first, 2 * X + W + Q) << "checkpoint_offload: two layer-input buffers and one recomputed layer";
  EXPECT_EQ(ckpt_off.second, 7 * X) << "the inputs of layers 0..L-2 in host memory";
  const auto ckpt = high(policy(MemoryPolicy::checkpoint));
  EXPECT_EQ(ckpt.first, 9 * X + W + Q) << "checkpoint keeps every layer input on the device";
}

TEST(CopyEngine, CopiesInOrderAndCountsBytes) {
  HostCopyEngine engine(0.0);
  std::vector<float> device(1 << 20), host_mem(1 << 20), back(1 << 20);
  std::iota(device.begin(), device.end(), 0.0f);
  const std::size_t half = device.size() / 2 * sizeof(float);
  const auto t1 = engine.submit(host_mem.data(), device.data(), half, CopyEngine::Direction::to_host);
  const auto t2 = engine.submit(host_mem.data() + device.size() / 2, device.data() + device.size() / 2, half,
                                CopyEngine::Direction::to_host);
  const auto t3 = engine.submit(back.data(), host_mem.data(), 2 * half, CopyEngine::Direction::to_device);
  EXPECT_LT(t1, t2);
  EXPECT_LT(t2, t3);
  engine.wait(t3);  // the host engine completes copies in order across directions too: t1 and t2 are done
  EXPECT_TRUE(engine.done(t1) && engine.done(t2));
  EXPECT_EQ(back, device);
  const auto c = engine.take_counters();
  EXPECT_EQ(c.bytes_to_host, 2 * half);
  EXPECT_EQ(c.bytes_to_device, 2 * half);
  EXPECT_GT(c.busy_seconds, 0.0);
  EXPECT_EQ(engine.take_counters().bytes_to_host, 0u) << "counters restart after a take";
}

TEST(Offload, ForwardTimedUntilStoppedCopiesCompleteAtTakeCounters) {
  const auto cfg = tiny_config(4);
  Trainer<double> t(cfg, policy(MemoryPolicy::offload, 0.37), train_options(), iota(kSeq), nullptr);
  const std::vector<Batch> batch = {synthetic_batch(cfg.vocab, kSeq, 3, 0, 0)};
  auto& store = t.activations();
  t.compute_gradients(batch);
  const double timed = store.forward_layer_seconds();
  EXPECT_GT(timed, 0.0) << "the first step measures the forward";
  const auto first = store.take_counters();
  EXPECT_GT(first.bytes_to_host, 0u);
  EXPECT_EQ(first.bytes_to_device, first.bytes_to_host) << "every copy of the step counted: all came back";
  store.stop_timing_forward();
  t.compute_gradients(batch);
  EXPECT_EQ(store.forward_layer_seconds(), timed) << "later forwards are not timed";
  const auto second = store.take_counters();
  EXPECT_EQ(second.bytes_to_host, first.bytes_to_host);
  EXPECT_EQ(second.bytes_to_device, first.bytes_to_device);
}

TEST(CopyEngine, OrderComputeAfterWaitsOnTheHostEngine) {
  HostCopyEngine engine(0.01);  // 0.01 GB/s: 1 MiB takes >= 105 ms, long enough to find it under way
  std::vector<char> a(1 << 20, 1), b(1 << 20, 0);
  const auto t = engine.submit(b.data(), a.data(), a.size(), CopyEngine::Direction::to_device);
  EXPECT_FALSE(engine.done(t)) << "the copy runs in the background";
  engine.order_compute_after(t);
  EXPECT_TRUE(engine.done(t)) << "compute on host threads can only be ordered by waiting";
  EXPECT_EQ(a, b);
  engine.order_compute_after(0);  // nothing to order after
}

TEST(CopyEngine, BothDirectionsInFlightAndWaitAll) {
  HostCopyEngine engine(1.0);  // throttled: the copies are still in flight when wait_all starts
  std::vector<float> device(1 << 20), host_mem(1 << 20, 0.f), device_in(1 << 20, 0.f), host_in(1 << 20);
  std::iota(device.begin(), device.end(), 0.0f);
  std::iota(host_in.begin(), host_in.end(), 7.0f);
  const std::size_t half = device.size() / 2 * sizeof(float);
  std::vector<CopyEngine::Ticket> out, in;
  for (std::size_t k = 0; k < 2; ++k) {  // interleaved: out, in, out, in
    const std::size_t at = k * device.size() / 2;
    out.push_back(engine.submit(host_mem.data() + at, device.data() + at, half, CopyEngine::Direction::to_host));
    in.push_back(engine.submit(device_in.data() + at, host_in.data() + at, half, CopyEngine::Direction::to_device));
  }
  engine.wait(in[1]);  // a direction's later ticket covers its earlier ones
  EXPECT_TRUE(engine.done(in[0]));
  engine.wait_all();
  for (auto t : {out[0], out[1], in[0], in[1]}) EXPECT_TRUE(engine.done(t));
  EXPECT_EQ(host_mem, device);
  EXPECT_EQ(device_in, host_in);
  const auto c = engine.take_counters();
  EXPECT_EQ(c.bytes_to_host, 2 * half);
  EXPECT_EQ(c.bytes_to_device, 2 * half);
  engine.wait_all();  // nothing submitted since: returns at once
}

TEST(CopyEngine, BandwidthCapSlowsCopiesToTheCap) {
  const double gbs = 0.5;  // 0.5 GB/s: 8 MiB take >= 16.8 ms
  HostCopyEngine engine(gbs);
  std::vector<char> a(8 << 20, 1), b(8 << 20, 0);
  const auto start = std::chrono::steady_clock::now();
  const auto t = engine.submit(b.data(), a.data(), a.size(), CopyEngine::Direction::to_host);
  EXPECT_FALSE(engine.done(t)) << "the copy runs in the background";
  engine.wait(t);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, double(a.size()) / (gbs * 1e9));
  EXPECT_EQ(a, b);
  const auto c = engine.take_counters();
  EXPECT_GE(c.busy_seconds, double(a.size()) / (gbs * 1e9));
  EXPECT_LE(double(a.size()) / c.busy_seconds, gbs * 1e9) << "measured bandwidth at most the cap";
}

TEST(OffloadAlpha, TimeBoundHostBoundAndTheirMinimum) {
  AlphaInputs in;
  in.bytes_x = 100;
  in.bytes_o = 150;
  in.bytes_rest = 500;
  in.bandwidth = 1000;     // bytes/s
  in.layer_seconds = 0.5;  // 500 bytes fit: (500 - 250) / 500
  EXPECT_DOUBLE_EQ(alpha_for_time(in), 0.5);
  in.layer_seconds = 0.2;  // not even x and o hide
  EXPECT_DOUBLE_EQ(alpha_for_time(in), 0.0);
  in.layer_seconds = 10;
  EXPECT_DOUBLE_EQ(alpha_for_time(in), 1.0);
  in.host_alpha_max = 0.25;
  EXPECT_DOUBLE_EQ(solve_alpha(in), 0.25);
  in.bandwidth = 0;        // nothing measured (no copy): only the host bound
  EXPECT_DOUBLE_EQ(solve_alpha(in), 0.25);

  const auto cfg = tiny_config(6);
  const auto shapes = activation_shapes(cfg, kSeq, {kSeq, cfg.heads});
  const auto host_at = [&](double a) {
    return double(ActivationStore<double>::host_bytes(MemoryPolicy::offload, cfg.layers, shapes, a));
  };
  const auto bound = [&](MemoryPolicy p, double budget) { return host_alpha_max<double>(p, cfg.layers, shapes, budget); };
  EXPECT_DOUBLE_EQ(bound(MemoryPolicy::offload, host_at(1.0)), 1.0);
  EXPECT_LT(bound(MemoryPolicy::offload, host_at(0.0) - 1), 0.0) << "alpha 0 does not fit";
  const double a = bound(MemoryPolicy::offload, host_at(0.5) + 1);
  EXPECT_LE(host_at(a), host_at(0.5) + 1);
  EXPECT_GT(host_at(a + 1.0 / kSeq), host_at(0.5) + 1) << "the largest alpha that fits";
  EXPECT_DOUBLE_EQ(bound(MemoryPolicy::checkpoint_offload, host_at(0.0)), 1.0);
}
