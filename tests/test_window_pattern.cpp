// A sliding window in some layers only (model.sliding_window_layers), with packed
// documents, run under mpiexec -n 2 and 4 (ctest test_window_pattern_np*): every layout
// (ring flash and RSA, zigzag and contiguous, Ulysses, the 2 x 2 hybrid), memory policies
// that recompute or offload, windows smaller and larger than a ring block, must reproduce
// the single-rank float64 step with the same per-layer masks to 1e-10 relative (bf16:
// within its stated tolerance); each rank's memory equals the memory model's to the byte
// (two q_lo sets, two strategies' buffers) and its bytes sent the communication model's.
// The single-rank results of the pattern differ from the window in every layer and in
// none, so a run that ignored the pattern could not pass.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>

#include "attention/strategy_factory.hpp"
#include "io/deck.hpp"  // kBf16LossTolerance
#include "kernels/bf16.hpp"
#include "predict/comm_model.hpp"
#include "model/documents.hpp"
#include "predict/memory_model.hpp"
#include "model/step_reduce.hpp"
#include "parallel/parallel_setup.hpp"
#include "test_util.hpp"

using namespace minilst;
using minilst::test::host;
using minilst::test::rel_err;
using minilst::test::world_size;

namespace {

// S = 41 in documents [0, 1), [1, 4), [4, 5), [5, 8), [8, 41): odd lengths, one-token ones,
// and one longer than both windows (5 and 23).
constexpr std::int64_t kSeq = 41;
const std::vector<std::int64_t> kDocs = {1, 4, 5, 8};

struct Case {
  std::string name;
  ParallelConfig par;
  std::int64_t window = 5;
  std::string layers = "every:2";  // model.sliding_window_layers
  MemoryPolicy policy = MemoryPolicy::full;
  int model_layers = 3;
};

struct Result {
  double loss;
  std::vector<double> grads;
};

ModelConfig model_of(const Case& c) {
  ModelConfig m;
  m.hidden = 32;  // head dim 8
  m.heads = 4;
  m.kv_heads = 2;
  m.layers = c.model_layers;
  m.intermediate = 20;
  m.vocab = 23;
  return m;
}

ModelOptions options_of(const Case& c, const std::string& layers) {
  ModelOptions o;
  o.policy = c.policy;
  o.offload.alpha = 0.37;
  o.mask = SequenceMask{kDocs, c.window, window_layers(layers)};
  return o;
}

TrainOptions train(double init_std) {
  TrainOptions t;
  t.seed = 5;
  t.init_std = init_std;  // double: large activations, so that a wrong term cannot hide in rounding
  t.norm_init_noise = 0.1;
  return t;
}

std::vector<Batch> sequence(const ModelConfig& cfg) { return {synthetic_batch(cfg.vocab, kSeq, 9, 0, 0, kDocs)}; }

template <class T> constexpr double init_std_of() { return std::is_same_v<T, bf16> ? 0.02 : 0.3; }

// One rank, all tokens, the default path, the case's masks (layers: its pattern or another).
template <class T, class Init = T>
Result single_rank(const Case& c, const std::string& layers) {
  ModelOptions o;
  o.mask = options_of(c, layers).mask;
  Trainer<T> t(model_of(c), o, train(init_std_of<Init>()), minilst::test::iota(kSeq), nullptr);
  const double loss = t.compute_gradients(sequence(model_of(c)));
  return {loss, host(t.grads().flat())};
}

template <class T>
void check_case(const Case& c) {
  constexpr Precision P = std::is_same_v<T, bf16> ? Precision::bf16 : Precision::float64;
  const int world = world_size();
  const auto cfg = model_of(c);
  const auto opts = options_of(c, c.layers);
  const std::string name = c.name + " (" + name_of(P) + ")";
  ASSERT_EQ(check_parallel(cfg, c.par, kSeq, world), "") << name;
  ParallelSetup setup(MPI_COMM_WORLD, c.par, kSeq);
  auto& tracker = MemoryTracker::instance();
  ASSERT_EQ(tracker.device_current(), 0u) << name << ": nothing left from earlier cases";
  tracker.reset_high_water();
  Result got;
  std::map<std::string, std::uint64_t> memory;
  {
    const auto geometry = attention_geometry(cfg, c.par, setup.layout(), setup.sp_rank());
    Trainer<T> t(cfg, opts, train(init_std_of<T>()), setup.local_positions(), nullptr,
                 make_attention_factory<T>(geometry, setup, opts.kernels, nullptr), ZeroOptions{0, false, world},
                 &setup.world());
    const double local = t.compute_gradients(setup.shard(sequence(cfg)));
    for (int k = 0; k < kNumMemCategories; ++k) memory[category_name(MemCategory(k))] = tracker.high_water(MemCategory(k));
    memory["device_total"] = tracker.device_high_water();
    got.loss = reduce_step(t, setup, local, nullptr);
    got.grads = host(t.grads().flat());
  }
  const auto predicted = predict_rank_memory(cfg, opts, c.par, setup.layout(), setup.sp_rank(), 1, P, opts.offload.alpha);
  for (const auto& [category, bytes] : memory)
    EXPECT_EQ(bytes, predicted.bytes.at(category)) << name << ": " << category << " high-water, sp rank "
                                                   << setup.sp_rank();
  const auto sent = setup.take_comm_bytes();
  const auto model = predict_comm_bytes(cfg, opts, c.par, setup.layout(), setup.sp_rank(), world, 1, P);
  for (const CommOp op : all_of<CommOp>())  // every operation: sent and modelled alike
    EXPECT_EQ(sent[op], model[op]) << name << ": " << name_of(op) << " bytes";

  const auto ref = single_rank<double, T>(c, c.layers);
  const double err = rel_err(got.grads, ref.grads);
  if constexpr (P == Precision::float64) {
    EXPECT_NEAR(got.loss, ref.loss, 1e-10 * std::abs(ref.loss)) << name;
    EXPECT_LT(err, 1e-10) << name;
    // The pattern matters: the window in every layer, or in none, is another result.
    const std::string none = "every:" + std::to_string(c.model_layers + 1) + ":" + std::to_string(c.model_layers);
    for (const std::string& other : {std::string("all"), none}) {
      const auto r = single_rank<double>(c, other);
      EXPECT_GT(rel_err(r.grads, ref.grads), 1e-6) << name << ": layers '" << other << "' give the same step";
    }
  } else {
    EXPECT_NEAR(got.loss, ref.loss, kBf16LossTolerance * std::abs(ref.loss)) << name;
    EXPECT_LT(err, 5e-2) << name;
    const auto one = single_rank<T>(c, c.layers);
    EXPECT_NEAR(got.loss, one.loss, kBf16LossTolerance * std::abs(one.loss)) << name << " against one rank in bf16";
    EXPECT_LT(rel_err(got.grads, one.grads), 5e-2) << name << " against one rank in bf16";
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) std::printf("  %-64s loss %.12f  grad rel err %.1e\n", name.c_str(), got.loss, err);
}

Case make(std::string name, int U, int R, RingLayout layout = RingLayout::zigzag) {
  Case c;
  c.name = std::move(name);
  c.par.ulysses = U;
  c.par.ring = R;
  c.par.layout = layout;
  return c;
}

}  // namespace

// The ring blocks hold about 41 / N tokens (2 x 10 or 2 x 5 in zigzag): window 5 is
// smaller than a block, window 23 larger than one.
TEST(WindowPattern, EveryLayoutReproducesTheSingleRankStep) {
  const int N = world_size();
  if (N == 1) GTEST_SKIP() << "sequence parallelism needs two ranks";
  const std::string n = std::to_string(N);
  std::vector<Case> cs;
  cs.push_back(make("ring " + n + " zigzag, window 5 in layers 0 2", 1, N));
  cs.push_back(make("ring " + n + " contiguous, window 23 in layer 1, checkpoint", 1, N, RingLayout::contiguous));
  cs.back().window = 23;
  cs.back().layers = "1";
  cs.back().policy = MemoryPolicy::checkpoint;
  cs.push_back(make("ring " + n + " rsa (seed), window 5 in layer 1, checkpoint_offload", 1, N));
  cs.back().par.variant = RingVariant::rsa;
  cs.back().layers = "1";
  cs.back().policy = MemoryPolicy::checkpoint_offload;
  cs.push_back(make("ring " + n + " rsa (flash bwd), contiguous, window 23 in layers 1 3, L=4", 1, N,
                    RingLayout::contiguous));
  cs.back().par.variant = RingVariant::rsa;
  cs.back().par.rsa_backward = RsaBackward::flash;
  cs.back().window = 23;
  cs.back().layers = "every:2:1";
  cs.back().model_layers = 4;
  cs.push_back(make("ulysses " + n + ", window 5 in layers 0 2, offload alpha 0.37", N, 1));
  cs.back().policy = MemoryPolicy::offload;
  if (N == 4) {
    cs.push_back(make("hybrid 2x2 zigzag, window 5 in layer 1, checkpoint", 2, 2));
    cs.back().layers = "1";
    cs.back().policy = MemoryPolicy::checkpoint;
    cs.push_back(make("hybrid 2x2 rsa (seed), contiguous, window 23 in layers 0 2", 2, 2, RingLayout::contiguous));
    cs.back().par.variant = RingVariant::rsa;
    cs.back().window = 23;
  }
  for (const auto& c : cs) check_case<double>(c);
  check_case<bf16>(cs.front());
  check_case<bf16>(cs.back());
}
