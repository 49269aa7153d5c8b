// Tensor parallelism (parallel.tensor) composed with Ulysses, ring, data parallelism, ZeRO,
// the activation policies, bf16 and packed documents: each layout's step against the
// single-rank float64 step (loss, every gradient put together from the slices, the gradient
// norm), its measured memory against the memory model to the byte, category by category,
// and its bytes sent against the communication model, operation by operation. On 2 and 4
// ranks (every case whose ranks divide the world).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention/strategy_factory.hpp"
#include "io/deck.hpp"  // kBf16LossTolerance
#include "kernels/bf16.hpp"
#include "model/documents.hpp"
#include "model/step_reduce.hpp"
#include "model/trainer.hpp"
#include "parallel/parallel_setup.hpp"
#include "predict/comm_model.hpp"
#include "predict/memory_model.hpp"
#include "test_util.hpp"

using namespace minilst;
using minilst::test::host;
using minilst::test::rel_err;

namespace {

struct Case {
  std::string name;
  ParallelConfig par;
  int heads = 4, kv_heads = 2, layers = 2;
  std::int64_t seq_len = 48;
  ModelOptions opts;
  int grad_accum = 1;
  bool bf16 = false;
  int ranks() const { return par.tensor * par.ulysses * par.ring; }  // the least world that runs it
};

ModelConfig model_of(const Case& c) {
  ModelConfig m;
  m.hidden = 8 * c.heads;  // head dim 8
  m.heads = c.heads;
  m.kv_heads = c.kv_heads;
  m.layers = c.layers;
  m.intermediate = 24;
  m.vocab = 28;
  return m;
}

TrainOptions train(bool bf16) {
  TrainOptions t;
  t.seed = 5;
  t.init_std = bf16 ? 0.02 : 0.3;  // double: large activations, where a wrong term cannot hide in rounding
  t.norm_init_noise = 0.1;
  return t;
}

std::vector<Batch> sequences(const Case& c, int replica) {
  std::vector<Batch> out;
  for (int m = 0; m < c.grad_accum; ++m)
    out.push_back(synthetic_batch(model_of(c).vocab, c.seq_len, 9, 0, replica * c.grad_accum + m,
                                  c.opts.mask.doc_starts));
  return out;
}

struct Reference {
  double loss, grad_norm;
  std::vector<double> grads;
};
// One rank, float64, all tokens, every replica's sequences as micro-steps.
Reference reference(const Case& c, int replicas) {
  std::vector<Batch> all;
  for (int d = 0; d < replicas; ++d)
    for (auto& b : sequences(c, d)) all.push_back(b);
  ModelOptions plain;
  plain.mask = c.opts.mask;
  Trainer<double> t(model_of(c), plain, train(c.bf16), minilst::test::iota(c.seq_len), nullptr);
  const double loss = t.compute_gradients(all);
  return {loss, t.grad_norm(), host(t.grads().flat())};
}

template <class T>
void check(const Case& c) {
  constexpr Precision P = std::is_same<T, bf16>::value ? Precision::bf16 : Precision::float64;
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto cfg = model_of(c);
  const std::string name = c.name + " on " + std::to_string(world) + " ranks";
  ASSERT_EQ(check_parallel(cfg, c.par, c.seq_len, world), "") << name;
  ParallelSetup setup(MPI_COMM_WORLD, c.par, c.seq_len, c.opts.mask);
  const int TP = c.par.tensor;
  const TensorGroup tp(&setup.tensor(), tensor_slice(cfg, TP, setup.tensor().rank()), nullptr);
  if (tp.kv_copies()) setup.also_count(*tp.kv_copies());
  auto& tracker = MemoryTracker::instance();
  ASSERT_EQ(tracker.device_current(), 0u) << name << ": nothing left from earlier cases";
  tracker.reset_high_water();
  const ZeroOptions zero{c.par.zero, false, world / TP};
  const auto geometry = attention_geometry(local_model(cfg, tp.slice()), c.par, setup.layout(), setup.sp_rank());
  double loss = 0, norm = 0;
  CommBytes measured{};
  std::vector<double> grads;
  {
    Trainer<T> t(cfg, c.opts, train(c.bf16), setup.local_positions(), nullptr,
                 make_attention_factory<T>(geometry, setup, c.opts.kernels, nullptr), zero, &setup.states(), tp);
    loss = t.compute_gradients(setup.shard(sequences(c, setup.dp_index())), 1.0 / setup.dp_size());
    const auto predicted = predict_rank_memory(cfg, c.opts, c.par, setup.layout(), setup.sp_rank(), c.grad_accum, P,
                                               c.opts.offload.alpha, zero);
    for (int k = 0; k < kNumMemCategories; ++k)
      EXPECT_EQ(tracker.high_water(MemCategory(k)), predicted.bytes.at(category_name(MemCategory(k))))
          << name << ": " << category_name(MemCategory(k)) << " high-water";
    EXPECT_EQ(tracker.device_high_water(), predicted.bytes.at("device_total")) << name << ": device_total";
    loss = reduce_step(t, setup, loss, nullptr);
    norm = t.grad_norm();
    measured = setup.take_comm_bytes();
    grads = t.states().gathered_gradients();  // the whole model's, put together from the slices
    setup.take_comm_bytes();                  // (a diagnostic's, not the step's)
    t.apply_optimizer();                      // ZeRO 1, 2: the weights' gathers after AdamW are the step's
    const CommBytes gathers = setup.take_comm_bytes();
    for (const CommOp op : all_of<CommOp>()) measured[op] += gathers[op];
  }
  const auto model = predict_comm_bytes(cfg, c.opts, c.par, setup.layout(), setup.sp_rank(), world, c.grad_accum, P,
                                        zero);
  for (const CommOp op : all_of<CommOp>())
    EXPECT_EQ(measured[op], model[op]) << name << ": " << name_of(op) << " bytes";
  EXPECT_GT(measured[CommOp::tp_allgather], 0u) << name;
  EXPECT_GT(measured[CommOp::tp_reduce_scatter], 0u) << name;

  const auto ref = reference(c, setup.dp_size());
  const double err = rel_err(grads, ref.grads);
  const double tol = P == Precision::bf16 ? 5e-2 : 1e-10;
  const double loss_tol = P == Precision::bf16 ? kBf16LossTolerance : 1e-10;
  EXPECT_NEAR(loss, ref.loss, loss_tol * std::abs(ref.loss)) << name;
  EXPECT_LT(err, tol) << name;
  EXPECT_NEAR(norm, ref.grad_norm, tol * ref.grad_norm) << name << ": gradient norm";
  if (rank == 0) std::printf("  %-60s loss %.12f  grad rel err %.1e\n", name.c_str(), loss, err);
}

Case make(std::string name, int T, int U = 1, int R = 1, int zero = 0) {
  Case c;
  c.name = std::move(name);
  c.par.tensor = T, c.par.ulysses = U, c.par.ring = R, c.par.zero = zero;
  return c;
}

std::vector<Case> cases(int world) {
  std::vector<Case> out;
  out.push_back(make("TP " + std::to_string(world), world));
  auto chunks = make("TP 2, checkpoint, MLP chunks 3, head chunks 2, 2 micro-steps", 2);
  chunks.opts.policy = MemoryPolicy::checkpoint;
  chunks.opts.mlp_chunks = 3, chunks.opts.lm_head_chunks = 2, chunks.grad_accum = 2;
  out.push_back(chunks);
  auto vanilla = make("TP 2, vanilla (the MLP's tensors kept)", 2);
  vanilla.opts.policy = MemoryPolicy::vanilla;
  out.push_back(vanilla);
  auto hf = make("TP 2, hf_checkpoint (upcast logits)", 2);
  hf.opts.policy = MemoryPolicy::hf_checkpoint;
  out.push_back(hf);
  auto docs = make("TP 2, packed documents and a window, checkpoint_offload", 2);
  docs.opts.policy = MemoryPolicy::checkpoint_offload;
  docs.opts.mask = {document_starts("11 5 17", docs.seq_len, 3), 9, LayerPattern{2, 0, {}, false}};  // window: layer 0
  out.push_back(docs);
  auto bf = make("TP 2, bf16", 2);
  bf.bf16 = true;
  out.push_back(bf);
  // MEMO's offload: the first round(alpha n) residual rows' segments travel, the rest recomputed
  // collectively; one MLP chunk keeps the MLP's tensors among them (3 layers: one goes to host)
  for (const double alpha : {0.0, 0.25, 1.0}) {
    auto off = make("TP 2, offload alpha " + std::to_string(alpha).substr(0, 4) + ", the MLP's kept", 2);
    off.opts.policy = MemoryPolicy::offload, off.opts.offload.alpha = alpha, off.opts.mlp_chunks = 1;
    off.layers = 3;
    out.push_back(off);
  }
  auto off_chunks = make("TP 2, offload alpha 0.5, MLP chunks 2, documents", 2);
  off_chunks.opts.policy = MemoryPolicy::offload, off_chunks.opts.offload.alpha = 0.5, off_chunks.opts.mlp_chunks = 2;
  off_chunks.opts.mask = {document_starts("20 28", off_chunks.seq_len, 2), 0, LayerPattern{}};
  off_chunks.layers = 3;
  out.push_back(off_chunks);
  auto off_bf = make("TP 2, offload alpha 0.25, bf16", 2);
  off_bf.bf16 = true, off_bf.opts.policy = MemoryPolicy::offload, off_bf.opts.offload.alpha = 0.25;
  off_bf.opts.mlp_chunks = 1, off_bf.layers = 3;
  out.push_back(off_bf);
  if (world >= 4) {
    auto kv = make("TP 4, kv heads replicated on 2 ranks each", 4);
    out.push_back(kv);
    out.push_back(make("TP 2 x Ulysses 2", 2, 2));
    out.push_back(make("TP 2 x ring 2 (zigzag)", 2, 1, 2));
    out.push_back(make("TP 2 x data parallel 2, ZeRO-1", 2, 1, 1, 1));
    out.push_back(make("TP 2 x data parallel 2, ZeRO-2", 2, 1, 1, 2));
    auto z3 = make("TP 2 x data parallel 2, ZeRO-3, 2 micro-steps", 2, 1, 1, 3);
    z3.grad_accum = 2;
    out.push_back(z3);
    auto bf_ring = make("TP 2 x ring 2, bf16, checkpoint", 2, 1, 2);
    bf_ring.bf16 = true, bf_ring.opts.policy = MemoryPolicy::checkpoint;
    out.push_back(bf_ring);
    for (const double alpha : {0.0, 0.5}) {  // Ulysses: q, k, v kept in its layout (re-derived at alpha 0)
      auto u = make("TP 2 x Ulysses 2, offload alpha " + std::to_string(alpha).substr(0, 3), 2, 2);
      u.opts.policy = MemoryPolicy::offload, u.opts.offload.alpha = alpha, u.opts.mlp_chunks = 1, u.layers = 3;
      out.push_back(u);
    }
    auto ring_off = make("TP 2 x ring 2, offload alpha 0.5, ZeRO-3", 2, 1, 2, 3);
    ring_off.opts.policy = MemoryPolicy::offload, ring_off.opts.offload.alpha = 0.5, ring_off.layers = 3;
    out.push_back(ring_off);
  }
  return out;
}

TEST(TensorParallel, EveryLayoutReproducesTheSingleRankStepWithTheModelsMemoryAndBytes) {
  const int world = minilst::test::world_size();
  ASSERT_GE(world, 2) << "tensor parallelism needs two ranks (registered on 2 and 4)";
  for (const auto& c : cases(world)) {
    if (world % c.ranks() != 0) continue;
    if (c.bf16) check<bf16>(c);
    else check<double>(c);
  }
}

TEST(TensorParallel, ShapesThatCannotSplitAreRefusedNamingTheKey) {
  ModelConfig m = model_of(Case{});
  ParallelConfig p;
  p.tensor = 3;
  EXPECT_NE(check_parallel(m, p, 48, 3).find("model.heads (4) is not divisible by parallel.tensor (3)"),
            std::string::npos);
  p.tensor = 2;
  EXPECT_NE(check_parallel(m, p, 47, 2).find("run.seq_len (47) must be divisible by 2"), std::string::npos);
  EXPECT_NE(check_parallel(m, p, 48, 3).find("not a multiple of parallel.tensor x parallel.ulysses"),
            std::string::npos);
  p.ulysses = 4;  // 2 query heads per tensor-parallel rank
  EXPECT_NE(check_parallel(m, p, 48, 8).find("per tensor-parallel rank"), std::string::npos);
  m.vocab = 27;
  p.ulysses = 1;
  EXPECT_NE(check_parallel(m, p, 48, 2).find("model.vocab (27) is not divisible by parallel.tensor (2)"),
            std::string::npos);
}

}  // namespace
