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
//  - MEMO's alpha: the time bound, the host bound and their minimum; auto among
//    MEMO's own values (0, 1/8, 1/4, 1/2, 1: memory.offload_alpha_values memo);
//  - offload composes with mini-sequences: alpha 1 with 8 MLP chunks on 8 layers
//    keeps fewer device bytes than offload alone and than chunks alone, exactly;
//  - under Ulysses, alpha = 0 swaps what MEMO's does (x, o, statistics), host bytes
//    against the formula, and the host bound past the step at alpha > 0.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <numeric>
#include <vector>

#include "attention/attention_geometry.hpp"
#include "io/deck.hpp"
#include "kernels/bf16.hpp"
#include "memory/host_copy_engine.hpp"
#include "memory/offload_alpha.hpp"
#include "memory/offload_controller.hpp"
#include "predict/memory_model.hpp"
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

ModelOptions policy(MemoryPolicy p, double alpha = 1.0, int mlp_chunks = 1) {
  ModelOptions o;
  o.policy = p;
  o.offload.alpha = alpha;
  o.mlp_chunks = mlp_chunks;
  o.lm_head_chunks = mlp_chunks;
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
  return name_of(o.policy) + (o.policy == MemoryPolicy::offload ? " alpha " + std::to_string(o.offload.alpha) : "") +
         (o.mlp_chunks > 1 ? ", " + std::to_string(o.mlp_chunks) + " MLP chunks" : "");
}

}  // namespace

TEST(Offload, EveryPolicyGivesFullLossAndGradients) {
  for (int L : {1, 2, 3, 5})
    for (int micro : {1, 2}) {
      const auto cfg = tiny_config(L);
      const auto ref = run(cfg, policy(MemoryPolicy::full), micro);
      for (const auto& o : {policy(MemoryPolicy::vanilla), policy(MemoryPolicy::checkpoint),
                            policy(MemoryPolicy::hf_checkpoint), policy(MemoryPolicy::checkpoint_offload),
                            policy(MemoryPolicy::checkpoint_offload, 1.0, 3), policy(MemoryPolicy::offload, 0.0),
                            policy(MemoryPolicy::offload, 0.37), policy(MemoryPolicy::offload, 1.0),
                            policy(MemoryPolicy::offload, 0.37, 3), policy(MemoryPolicy::offload, 1.0, 4)}) {
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

// Offload with mini-sequences (MsT, ALST's tiled MLP beside the swap): with more than
// one MLP chunk the MLP keeps nothing and recomputes each chunk's gate and up, so no
// [S, I] tensor exists whole while offload holds two layers. On 8 layers, alpha 1
// with 8 MLP (and LM-head) chunks keeps fewer device bytes than offload alone (whose
// two rounding buffers hold the MLP's tensors) and than chunks alone (every layer's
// saved set), with their loss and gradients and the memory model's bytes exactly.
TEST(Offload, ComposesWithMiniSequences) {
  const auto cfg = tiny_config(8);
  const std::size_t S = 64, d = cfg.hidden, h = cfg.head_dim(), I = cfg.intermediate;
  const std::size_t Hh = cfg.heads * h, Gh = cfg.kv_heads * h;
  const std::size_t X = S * d * sizeof(double);
  const std::size_t W = S * (Hh + cfg.heads) * sizeof(double);         // whole: o, lse
  const std::size_t Q = S * (Hh + 2 * Gh + d) * sizeof(double);         // rows: q, k, v, y
  const std::size_t M = S * (d + 3 * I) * sizeof(double);               // the MLP's, where kept
  struct High {
    std::size_t activations = 0, device = 0, host = 0;
    Result result;
  };
  const auto high = [&](const ModelOptions& o) {
    auto& tracker = MemoryTracker::instance();
    EXPECT_EQ(tracker.device_current(), 0u) << "nothing left from earlier tests";
    tracker.reset_high_water();
    High r;
    {
      Trainer<double> t(cfg, o, train_options(), iota(S), nullptr);
      r.result.loss = t.compute_gradients({synthetic_batch(cfg.vocab, S, 3, 0, 0)});
      r.result.grads = host(t.grads().flat());
    }
    r.activations = tracker.high_water(MemCategory::activations);
    r.device = tracker.device_high_water();
    r.host = tracker.high_water(MemCategory::host_offload);
    const auto model = predict_memory(cfg, o, S, Precision::float64);
    EXPECT_EQ(r.activations, model.at("activations")) << describe(o);
    EXPECT_EQ(r.device, model.at("device_total")) << describe(o);
    EXPECT_EQ(r.host, model.at("host_offload")) << describe(o);
    return r;
  };
  const auto both = high(policy(MemoryPolicy::offload, 1.0, 8));
  const auto offload_alone = high(policy(MemoryPolicy::offload, 1.0, 1));
  const auto chunks_alone = high(policy(MemoryPolicy::full, 1.0, 8));
  std::printf("L = 8, S = 64: device activations / total, bytes: offload alpha 1 + 8 chunks %zu / %zu, offload "
              "alone %zu / %zu, 8 chunks alone %zu / %zu\n",
              both.activations, both.device, offload_alone.activations, offload_alone.device,
              chunks_alone.activations, chunks_alone.device);
  EXPECT_LT(both.activations, offload_alone.activations);
  EXPECT_LT(both.activations, chunks_alone.activations);
  EXPECT_LT(both.device, offload_alone.device);
  EXPECT_LT(both.device, chunks_alone.device);
  EXPECT_EQ(both.activations, 2 * X + 2 * (W + Q)) << "two rounding buffers without the MLP's tensors";
  EXPECT_EQ(offload_alone.activations, 2 * X + 2 * (W + Q + M)) << "the MLP's tensors in the rounding buffers";
  EXPECT_EQ(chunks_alone.activations, 9 * X + 8 * (W + Q));
  EXPECT_EQ(both.host, 7 * X + 6 * (W + Q)) << "x of layers 0..6, o, lse, q, k, v, y of layers 0..5 (no MLP's)";
  for (const auto* other : {&offload_alone, &chunks_alone}) {
    EXPECT_NEAR(both.result.loss, other->result.loss, 1e-12 * std::abs(other->result.loss));
    EXPECT_LT(rel_err(both.result.grads, other->result.grads), 1e-12);
  }
}

TEST(OffloadAlpha, AutoAmongMemoValues) {
  EXPECT_DOUBLE_EQ(allowed_alpha(0.3, AlphaValues::continuous), 0.3);
  for (const auto& [bound, want] : std::vector<std::pair<double, double>>{
           {0.0, 0.0}, {0.1, 0.0}, {0.125, 0.125}, {0.2, 0.125}, {0.3, 0.25}, {0.499, 0.25}, {0.5, 0.5},
           {0.99, 0.5}, {1.0, 1.0}})
    EXPECT_DOUBLE_EQ(allowed_alpha(bound, AlphaValues::memo), want) << "bound " << bound;
  AlphaInputs in;
  in.bytes_x = 100;
  in.bytes_o = 150;
  in.bytes_rest = 500;
  in.bandwidth = 1000;
  in.layer_seconds = 0.4;  // the time bound: (400 - 250) / 500 = 0.3
  EXPECT_DOUBLE_EQ(solve_alpha(in), 0.3);
  EXPECT_DOUBLE_EQ(solve_alpha(in, AlphaValues::memo), 0.25);
  in.layer_seconds = 10;
  in.host_alpha_max = 0.6;
  EXPECT_DOUBLE_EQ(solve_alpha(in), 0.6);
  EXPECT_DOUBLE_EQ(solve_alpha(in, AlphaValues::memo), 0.5);
  in.host_alpha_max = 0.1;
  EXPECT_DOUBLE_EQ(solve_alpha(in, AlphaValues::memo), 0.0);

  // The warm-up step of alpha auto: the largest alpha the host budget allows, of the set.
  const auto cfg = tiny_config(6);
  const std::int64_t S = 64;
  const auto shapes = activation_shapes(cfg, S, {S, cfg.heads});
  const auto host_at = [&](double a) {
    return double(ActivationStore<double>::host_bytes(MemoryPolicy::offload, cfg.layers, shapes, a));
  };
  const double budget = (host_at(0.5) + host_at(1.0)) / 2;  // room for alpha in (0.5, 1)
  for (const auto values : {AlphaValues::continuous, AlphaValues::memo}) {
    ModelOptions o = policy(MemoryPolicy::offload, 1.0);
    OffloadController<double> c(o, cfg.layers, shapes, OffloadSettings{true, budget, false, values}, MPI_COMM_WORLD);
    EXPECT_EQ(c.error(), "");
    if (values == AlphaValues::memo) {
      EXPECT_DOUBLE_EQ(o.offload.alpha, 0.5) << "MEMO's values";
    } else {
      EXPECT_GT(o.offload.alpha, 0.5);
      EXPECT_LT(o.offload.alpha, 1.0);
      EXPECT_LE(host_at(o.offload.alpha), budget);
    }
    EXPECT_DOUBLE_EQ(c.largest_alpha(), o.offload.alpha);
  }
}

// Under Ulysses the strategy keeps q, k, v and its o head-sharded (the kept family).
// At alpha = 0 they are MEMO's "rest": not swapped but re-derived in the backward
// (projected again, scattered again), so the host holds x, o and the statistics alone:
//   (L-1) S d T + (L-2) (S Hh T + |stats| A)
// At alpha > 0 they travel whole, which the host bound steps over. The exactness and
// the communication of the re-derived set: test_parallel, the reference tests.
TEST(Offload, UlyssesAlphaZeroSwapsWhatMemoDoes) {
  const auto cfg = tiny_config(5);
  ParallelConfig par;
  par.ulysses = 2;
  const std::int64_t S = 43;  // members of 21 and 22 tokens
  const SequenceLayout layout(S, par.ulysses, 1, RingLayout::zigzag);
  const int L = cfg.layers;
  const std::uint64_t T = sizeof(double), d = cfg.hidden, Hh = cfg.heads * cfg.head_dim(), I = cfg.intermediate;
  for (int sp = 0; sp < par.ulysses; ++sp) {
    const auto g = attention_geometry(cfg, par, layout, sp);
    const auto shapes = activation_shapes(cfg, g.local_rows, g.stats_shape(), g.saved_layout());
    ASSERT_FALSE(shapes.saved.local);
    const std::uint64_t Sl = g.local_rows;
    const std::uint64_t x = Sl * d * T, o = Sl * Hh * T, stats = std::uint64_t(shapes.stats.rows * shapes.stats.cols) * T;
    const std::uint64_t kept = std::uint64_t(2 * shapes.saved.q.rows * shapes.saved.q.cols +  // q, o_kept
                                             2 * shapes.saved.kv.rows * shapes.saved.kv.cols) * T;  // k, v
    const auto host_at = [&](double a) { return ActivationStore<double>::host_bytes(MemoryPolicy::offload, L, shapes, a); };
    const std::string where = "sp rank " + std::to_string(sp);
    EXPECT_EQ(host_at(0.0), (L - 1) * x + (L - 2) * (o + stats)) << where << ": x, o and statistics alone";
    const std::uint64_t r = offload_host_rows(0.37, std::int64_t(Sl));
    EXPECT_EQ(host_at(0.37), (L - 1) * x + (L - 2) * (o + stats + kept + r * (2 * d + 3 * I) * T))
        << where << ": the kept set whole, y and the MLP's by rows";
    // The run's own allocations, replayed, agree; the device holds one transient kept set.
    const auto at0 = predict_rank_memory(cfg, policy(MemoryPolicy::offload, 0.0), par, layout, sp, 1,
                                         Precision::float64, 0.0);
    const auto at037 = predict_rank_memory(cfg, policy(MemoryPolicy::offload, 0.37), par, layout, sp, 1,
                                           Precision::float64, 0.37);
    EXPECT_EQ(at0.bytes.at("host_offload"), host_at(0.0)) << where;
    EXPECT_EQ(at037.bytes.at("host_offload"), host_at(0.37)) << where;
    EXPECT_EQ(at037.bytes.at("activations") - at0.bytes.at("activations"),
              kept + 2 * (Sl * (2 * d + 3 * I) * T) - Sl * d * T)
        << where << ": alpha 0.37 adds a second kept set and two row sets (y and the MLP's) for the transient one";
    // The host bound: from alpha 0 to one row the footprint jumps (the kept set starts travelling).
    const double zero = double(host_at(0.0)), one_row = double(host_at(1.0 / double(Sl)));
    EXPECT_GT(one_row - zero, double(kept) * (L - 2)) << where;
    EXPECT_DOUBLE_EQ(host_alpha_max<double>(MemoryPolicy::offload, L, shapes, (zero + one_row) / 2), 0.0) << where;
    const double budget = double(host_at(0.5));
    const double a = host_alpha_max<double>(MemoryPolicy::offload, L, shapes, budget);
    EXPECT_LE(double(host_at(a)), budget) << where;
    EXPECT_GT(double(host_at(a + 1.0 / double(Sl))), budget) << where << ": the largest alpha that fits";
  }
  // Llama-3-8B at 128K tokens on Ulysses 8 (bf16; `minilst plan inputs/llama3_8b.yaml --ranks 8 --set
  // memory.policy=offload --set memory.offload_alpha=0 --set run.seq_len=131072`): 31 x 128 MiB of x and
  // 30 x (128 MiB of o + 2 MiB of fp32 statistics) = 7868 MiB per rank, where swapping q, k, v, o_kept
  // whole held 17468 MiB.
  ModelConfig llama;
  llama.hidden = 4096; llama.layers = 32; llama.heads = 32; llama.kv_heads = 8; llama.intermediate = 14336;
  llama.vocab = 128256;
  ParallelConfig u8;
  u8.ulysses = 8;
  const SequenceLayout big(131072, 8, 1, RingLayout::zigzag, false);
  const auto g = attention_geometry(llama, u8, big, 0);
  const auto shapes = activation_shapes(llama, g.local_rows, g.stats_shape(), g.saved_layout());
  EXPECT_EQ(ActivationStore<bf16>::host_bytes(MemoryPolicy::offload, 32, shapes, 0.0), 7868ull << 20);
}
