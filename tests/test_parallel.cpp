// Sequence parallelism, run under mpiexec -n 1, 2 and 4 (ctest test_parallel_np*):
// every strategy and layout that fits the world size (Ulysses with split and
// replicated kv heads, ring flash and RSA, zigzag and contiguous, overlap on and
// off, the 2D hybrid, the data-parallel remainder), with GQA/MQA/MHA, chunking,
// every memory policy (offload kinds with 3 layers, so the device buffers wrap)
// and sequence lengths that no degree divides, must reproduce the
// single-rank loss and gradients to 1e-10 relative in double; the bytes each
// rank sends must equal the analytic volume, and every memory category's
// high-water the analytic memory model's, to the byte. Layout properties too.
// The same cases in bf16 mixed precision: within the stated tolerance (loss 5e-3,
// gradients 5e-2 relative) of the float64 result and of the single-rank bf16 run,
// memory and bytes equal to the bf16 model, Ulysses and ring bytes half of fp32's.
// The ring hop's launch (Communicator::launch): over a communicator that, like the
// NCCL backend, holds transfers back until their tag is launched, a hop is
// launched at start() (its transfers under way while the block computes), what
// start() did not launch is launched by finish(), and ring attention (flash with
// and without overlap, RSA) stays exact.
// The rank grid: tensor-parallel groups of consecutive ranks, the sequence groups across
// them, the replicas outermost, for every factorisation of the world.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <functional>
#include <map>
#include <set>

#include "attention/attention_work.hpp"
#include "attention/local_attention.hpp"
#include "attention/ring_attention.hpp"
#include "attention/ring_hop.hpp"
#include "attention/ulysses_attention.hpp"
#include "attention/strategy_factory.hpp"
#include "io/deck.hpp"  // kBf16LossTolerance
#include "kernels/bf16.hpp"
#include "predict/comm_model.hpp"
#include "model/documents.hpp"
#include "predict/flops.hpp"
#include "predict/memory_model.hpp"
#include "model/step_reduce.hpp"
#include "parallel/mpi_communicator.hpp"
#include "parallel/mask_pairs.hpp"
#include "parallel/ring_reach.hpp"
#include "parallel/parallel_setup.hpp"
#include "test_util.hpp"

using namespace minilst;
using minilst::test::host;
using minilst::test::rel_err;
using minilst::test::world_size;

namespace {

struct Case {
  std::string name;
  ParallelConfig par;
  int heads = 4, kv_heads = 2, layers = 2;
  std::int64_t seq_len = 37;
  ModelOptions opts;
  int grad_accum = 1;
};

struct Result {
  double loss;
  std::vector<double> grads;
};

ModelConfig model_of(const Case& c) {
  ModelConfig m;
  m.hidden = 8 * c.heads;  // head dim 8
  m.heads = c.heads;
  m.kv_heads = c.kv_heads;
  m.layers = c.layers;
  m.intermediate = 20;
  m.vocab = 23;
  return m;
}

// init_std 0.3 (double): large activations, so that a wrong term cannot hide in
// rounding; bf16 cases use the decks' 0.02, where the stated tolerance applies.
TrainOptions train(double init_std = 0.3) {
  TrainOptions t;
  t.seed = 5;
  t.init_std = init_std;
  t.norm_init_noise = 0.1;
  return t;
}


std::vector<Batch> sequences(const Case& c, int replica) {
  std::vector<Batch> out;
  for (int m = 0; m < c.grad_accum; ++m) out.push_back(synthetic_batch(23, c.seq_len, 9, 0, replica * c.grad_accum + m));
  return out;
}

// The plain computation: one rank, all tokens, all replicas' sequences as micro-batches.
template <class T> constexpr Precision precision_of();
template <> constexpr Precision precision_of<double>() { return Precision::float64; }
template <> constexpr Precision precision_of<bf16>() { return Precision::bf16; }
template <class T> constexpr double init_std_of() { return precision_of<T>() == Precision::bf16 ? 0.02 : 0.3; }

template <class T, class Init = T>
Result reference(const Case& c, int replicas) {
  std::vector<Batch> all;
  for (int d = 0; d < replicas; ++d)
    for (auto& b : sequences(c, d)) all.push_back(b);
  ModelOptions plain;  // the reference's path: full, unchunked, the default kernels; the case's mask
  plain.mask = c.opts.mask;
  Trainer<T> t(model_of(c), plain, train(init_std_of<Init>()), minilst::test::iota(c.seq_len), nullptr);
  const double loss = t.compute_gradients(all);
  return {loss, host(t.grads().flat())};
}

// Runs case c on the ranks of `comm` (the world, or a part of it) and checks it;
// returns the bytes each operation sent on this rank.
template <class T>
CommBytes check_case(const Case& c, MPI_Comm comm = MPI_COMM_WORLD) {
  constexpr Precision P = precision_of<T>();
  int world = 1;
  MPI_Comm_size(comm, &world);
  const auto cfg = model_of(c);
  const std::string name = c.name + " (" + name_of(P) + ")";
  EXPECT_EQ(check_parallel(cfg, c.par, c.seq_len, world), "") << name;
  if (!check_parallel(cfg, c.par, c.seq_len, world).empty()) return {};
  ParallelSetup setup(comm, c.par, c.seq_len, c.opts.mask);
  auto& tracker = MemoryTracker::instance();
  EXPECT_EQ(tracker.device_current(), 0u) << name << ": nothing left from earlier cases";
  tracker.reset_high_water();
  const auto geometry = attention_geometry(cfg, c.par, setup.layout(), setup.sp_rank());
  Trainer<T> t(cfg, c.opts, train(init_std_of<T>()), setup.local_positions(), nullptr,
               make_attention_factory<T>(geometry, setup, c.opts.kernels, nullptr), ZeroOptions{0, false, world},
               &setup.world());
  double loss = t.compute_gradients(setup.shard(sequences(c, setup.dp_index())), 1.0 / setup.dp_size());
  const auto predicted = predict_rank_memory(cfg, c.opts, c.par, setup.layout(), setup.sp_rank(), c.grad_accum, P,
                                             c.opts.offload.alpha);
  for (int k = 0; k < kNumMemCategories; ++k)
    EXPECT_EQ(tracker.high_water(MemCategory(k)), predicted.bytes.at(category_name(MemCategory(k))))
        << name << ": " << category_name(MemCategory(k)) << " high-water, sp rank " << setup.sp_rank();
  EXPECT_EQ(tracker.device_high_water(), predicted.bytes.at("device_total")) << name << ": device_total";
  loss = reduce_step(t, setup, loss, nullptr);  // the driver's own data-parallel reduction
  const auto g = host(t.grads().flat());

  const auto ref = reference<double, T>(c, setup.dp_size());
  const double err = rel_err(g, ref.grads);
  if constexpr (P == Precision::float64) {
    EXPECT_NEAR(loss, ref.loss, 1e-10 * std::abs(ref.loss)) << name;
    EXPECT_LT(err, 1e-10) << name;
  } else {  // bf16: the stated tolerance, against float64 and against the single-rank bf16 run
    EXPECT_NEAR(loss, ref.loss, kBf16LossTolerance * std::abs(ref.loss)) << name;
    EXPECT_LT(err, 5e-2) << name;
    const auto one = reference<T>(c, setup.dp_size());
    EXPECT_NEAR(loss, one.loss, kBf16LossTolerance * std::abs(one.loss)) << name << " against one rank in bf16";
    EXPECT_LT(rel_err(g, one.grads), 5e-2) << name << " against one rank in bf16";
  }
  const auto measured = setup.take_comm_bytes();
  const auto model = predict_comm_bytes(cfg, c.opts, c.par, setup.layout(), setup.sp_rank(), world, c.grad_accum, P);
  const auto fp32 = predict_comm_bytes(cfg, c.opts, c.par, setup.layout(), setup.sp_rank(), world, c.grad_accum,
                                       Precision::float32);
  for (const CommOp op : all_of<CommOp>()) {  // every operation: sent and modelled alike (0 for both where none)
    EXPECT_EQ(measured[op], model[op]) << name << ": " << name_of(op) << " bytes";
    const bool summed = op == CommOp::allreduce || op == CommOp::rsa_allreduce;  // sums travel in fp32 under bf16 too
    if (P == Precision::bf16 && !summed)
      EXPECT_EQ(2 * model[op], fp32[op]) << name << ": " << name_of(op) << " not half of fp32's";
  }
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0)
    std::printf("  %-52s %s  loss %.12f  grad rel err %.1e\n", name.c_str(), geometry.name().c_str(), loss, err);
  return measured;
}

Case make(std::string name, int U, int R, RingLayout layout = RingLayout::zigzag) {
  Case c;
  c.name = std::move(name);
  c.par.ulysses = U;
  c.par.ring = R;
  c.par.layout = layout;
  return c;
}

// Cases without sequence parallelism: at every world size, paths that differ from the
// reference's (full, unchunked, one micro-step, optimised kernels): on one rank these
// are what the comparison tests.
std::vector<Case> data_parallel_cases() {
  std::vector<Case> out;
  out.push_back(make("no sequence parallelism (data parallel)", 1, 1));
  // At every world size, also paths that differ from the reference's (full, unchunked, one micro-step):
  // on one rank these are what the comparison tests.
  auto cc = make("no sp, chunks 3/5, checkpoint, S=41", 1, 1);
  cc.seq_len = 41;
  cc.opts.mlp_chunks = 3;
  cc.opts.lm_head_chunks = 5;
  cc.opts.policy = MemoryPolicy::checkpoint;
  out.push_back(cc);
  auto co = make("no sp, offload alpha 0.37, L=3, grad_accum 2", 1, 1);
  co.opts.policy = MemoryPolicy::offload;
  co.opts.offload.alpha = 0.37;
  co.layers = 3;
  co.grad_accum = 2;
  out.push_back(co);
  auto cv = make("no sp, vanilla, MQA", 1, 1);
  cv.opts.policy = MemoryPolicy::vanilla;
  cv.kv_heads = 1;
  out.push_back(cv);
  auto ch = make("no sp, hf_checkpoint (logits, fp32 upcast and gradient)", 1, 1);
  ch.opts.policy = MemoryPolicy::hf_checkpoint;
  out.push_back(ch);
  auto ck = make("no sp, reference kernels, checkpoint, chunks 2/3", 1, 1);
  ck.opts.kernels.variant = KernelVariant::reference;
  ck.opts.policy = MemoryPolicy::checkpoint;
  ck.opts.mlp_chunks = 2;
  ck.opts.lm_head_chunks = 3;
  out.push_back(ck);
  return out;
}

// Ulysses and ring cases of degree P.
std::vector<Case> degree_cases(int P) {
  std::vector<Case> out;
  {
    auto u = make("ulysses " + std::to_string(P) + ", GQA 4/2", P, 1);
    out.push_back(u);
    auto mqa = make("ulysses " + std::to_string(P) + ", MQA (kv replicated)", P, 1);
    mqa.kv_heads = 1;
    out.push_back(mqa);
    auto mha = make("ulysses " + std::to_string(P) + ", MHA, S=41, chunks 3/5", P, 1);
    mha.kv_heads = 4;
    mha.seq_len = 41;
    mha.opts.mlp_chunks = 3;
    mha.opts.lm_head_chunks = 5;
    out.push_back(mha);
    auto rz = make("ring " + std::to_string(P) + " zigzag", 1, P);
    out.push_back(rz);
    auto rc = make("ring " + std::to_string(P) + " contiguous, MQA, S=23", 1, P, RingLayout::contiguous);
    rc.kv_heads = 1;
    rc.seq_len = 23;
    out.push_back(rc);
    auto rs = make("ring " + std::to_string(P) + " rsa (seed backward), checkpoint", 1, P);
    rs.par.variant = RingVariant::rsa;
    rs.opts.policy = MemoryPolicy::checkpoint;
    out.push_back(rs);
    auto rso = make("ring " + std::to_string(P) + " rsa (seed), contiguous, MQA, offload 0.37, L=3", 1, P,
                    RingLayout::contiguous);
    rso.par.variant = RingVariant::rsa;
    rso.kv_heads = 1;
    rso.opts.policy = MemoryPolicy::offload;
    rso.opts.offload.alpha = 0.37;
    rso.layers = 3;
    out.push_back(rso);
    auto rf = make("ring " + std::to_string(P) + " rsa, flash backward, S=29", 1, P);
    rf.par.variant = RingVariant::rsa;
    rf.par.rsa_backward = RsaBackward::flash;
    rf.seq_len = 29;
    out.push_back(rf);
    auto rn = make("ring " + std::to_string(P) + " no overlap, grad_accum 2", 1, P);
    rn.par.overlap = false;
    rn.grad_accum = 2;
    out.push_back(rn);
    auto ro = make("ring " + std::to_string(P) + " offload alpha 0.37, L=3, grad_accum 2", 1, P);
    ro.opts.policy = MemoryPolicy::offload;
    ro.opts.offload.alpha = 0.37;
    ro.layers = 3;
    ro.grad_accum = 2;
    out.push_back(ro);
    auto rv = make("ring " + std::to_string(P) + " vanilla", 1, P);
    rv.opts.policy = MemoryPolicy::vanilla;
    out.push_back(rv);
    auto uo = make("ulysses " + std::to_string(P) + " checkpoint_offload, L=3, S=41", P, 1);
    uo.opts.policy = MemoryPolicy::checkpoint_offload;
    uo.layers = 3;
    uo.seq_len = 41;
    out.push_back(uo);
    // Head-sharded q, k, v, o through host memory (whole), y and the MLP's by token rows: layers 0..2 go to host.
    auto uf = make("ulysses " + std::to_string(P) + " offload alpha 0.37, L=5, S=43", P, 1);
    uf.opts.policy = MemoryPolicy::offload;
    uf.opts.offload.alpha = 0.37;
    uf.layers = 5;
    uf.seq_len = 43;
    out.push_back(uf);
    // MEMO's alpha = 0 under Ulysses: the head-sharded set re-derived before each layer's backward.
    auto u0 = make("ulysses " + std::to_string(P) + " offload alpha 0, L=5, S=43", P, 1);
    u0.opts.policy = MemoryPolicy::offload;
    u0.opts.offload.alpha = 0.0;
    u0.layers = 5;
    u0.seq_len = 43;
    out.push_back(u0);
    auto u1 = make("ulysses " + std::to_string(P) + " offload alpha 1, MQA, chunks 3/2, L=4", P, 1);
    u1.kv_heads = 1;
    u1.opts.policy = MemoryPolicy::offload;
    u1.opts.offload.alpha = 1.0;
    u1.opts.mlp_chunks = 3;
    u1.opts.lm_head_chunks = 2;
    u1.layers = 4;
    out.push_back(u1);
    auto rc3 = make("ring " + std::to_string(P) + " offload alpha 0.37, chunks 3, L=4", 1, P);
    rc3.opts.policy = MemoryPolicy::offload;
    rc3.opts.offload.alpha = 0.37;
    rc3.opts.mlp_chunks = 3;
    rc3.layers = 4;
    out.push_back(rc3);
    auto uh = make("ulysses " + std::to_string(P) + " hf_checkpoint", P, 1);
    uh.opts.policy = MemoryPolicy::hf_checkpoint;
    out.push_back(uh);
    auto rk = make("ring " + std::to_string(P) + " reference kernels, S=29", 1, P);
    rk.opts.kernels.variant = KernelVariant::reference;
    rk.seq_len = 29;
    out.push_back(rk);
  }
  return out;
}

// The 2 x 2 hybrid and 4-way Ulysses with more heads.
std::vector<Case> four_rank_cases() {
  std::vector<Case> out;
  {
    out.push_back(make("hybrid 2x2 zigzag", 2, 2));
    auto hr = make("hybrid 2x2 rsa (seed backward), MHA, grad_accum 2", 2, 2);
    hr.par.variant = RingVariant::rsa;
    hr.kv_heads = 4;
    hr.grad_accum = 2;
    out.push_back(hr);
    auto hc = make("hybrid 2x2 contiguous, MQA, chunks 4/4, checkpoint", 2, 2, RingLayout::contiguous);
    hc.kv_heads = 1;
    hc.opts.mlp_chunks = hc.opts.lm_head_chunks = 4;
    hc.opts.policy = MemoryPolicy::checkpoint;
    out.push_back(hc);
    for (double alpha : {0.0, 0.37, 1.0}) {
      auto ho = make("hybrid 2x2 offload alpha " + std::to_string(alpha).substr(0, 4) + ", L=3", 2, 2);
      ho.opts.policy = MemoryPolicy::offload;
      ho.opts.offload.alpha = alpha;
      ho.layers = 3;
      out.push_back(ho);
    }
    auto hk = make("hybrid 2x2 checkpoint_offload, L=3, MQA", 2, 2);
    hk.opts.policy = MemoryPolicy::checkpoint_offload;
    hk.layers = 3;
    hk.kv_heads = 1;
    out.push_back(hk);
    auto ku = make("ulysses 4 with 8 heads, 2 kv heads replicated", 4, 1);
    ku.heads = 8;
    out.push_back(ku);
  }
  return out;
}

// All cases whose sequence-parallel degree divides the world size.
std::vector<Case> cases() {
  std::vector<Case> out = data_parallel_cases();
  for (int P : {2, 4})
    if (world_size() % P == 0)
      for (auto& c : degree_cases(P)) out.push_back(std::move(c));
  if (world_size() % 4 == 0)
    for (auto& c : four_rank_cases()) out.push_back(std::move(c));
  return out;
}

// Every operation handed to another communicator; the tests' communicators below
// change what they need.
class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return "forwarding " + inner_.backend(); }
  bool overlaps_transfers() const override { return inner_.overlaps_transfers(); }
  bool device_ordered() const override { return inner_.device_ordered(); }
  void alltoallv(const void* send, const std::vector<std::int64_t>& scounts, const std::vector<std::int64_t>& sdispls,
                 void* recv, const std::vector<std::int64_t>& rcounts, const std::vector<std::int64_t>& rdispls,
                 DType type, CommOp op) override {
    inner_.alltoallv(send, scounts, sdispls, recv, rcounts, rdispls, type, op);
  }
  void allreduce_sum(void* buf, std::size_t count, DType type, CommOp op) override {
    inner_.allreduce_sum(buf, count, type, op);
  }
  RequestPtr iallgather(const void* send, void* recv, std::size_t count, DType type, CommOp op) override {
    return inner_.iallgather(send, recv, count, type, op);
  }
  RequestPtr ireduce_scatter_sum(const void* send, void* recv, std::size_t count, DType type,
                                 CommOp op) override {
    return inner_.ireduce_scatter_sum(send, recv, count, type, op);
  }
  RequestPtr isend(const void* buf, std::size_t count, DType type, int peer, int tag, CommOp op) override {
    return inner_.isend(buf, count, type, peer, tag, op);
  }
  RequestPtr irecv(void* buf, std::size_t count, DType type, int peer, int tag) override {
    return inner_.irecv(buf, count, type, peer, tag);
  }
  void launch(int tag) override { inner_.launch(tag); }
  void wait(RequestPtr& request) override { inner_.wait(request); }
  bool test(RequestPtr& request) override { return inner_.test(request); }
  void barrier() override { inner_.barrier(); }
  std::unique_ptr<Communicator> split(int, int) const override {
    throw std::logic_error("ForwardingCommunicator::split: not needed");
  }

 protected:
  Communicator& inner_;
};

// Over another communicator (MPI here), isend/irecv held back until launch(tag), as
// the NCCL backend holds them; counts what the ring does with it.
class DeferringCommunicator final : public ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  int launches = 0;          // launch() calls that started transfers
  int unlaunched_waits = 0;  // waits on a transfer whose tag was never launched
  int tests_under_way = 0;   // test() calls that found their transfer under way

  std::string backend() const override { return "deferring " + inner_.backend(); }
  bool overlaps_transfers() const override { return true; }
  RequestPtr isend(const void* buf, std::size_t count, DType type, int peer, int tag, CommOp op) override {
    return hold(tag, [=] { return inner_.isend(buf, count, type, peer, tag, op); });
  }
  RequestPtr irecv(void* buf, std::size_t count, DType type, int peer, int tag) override {
    return hold(tag, [=] { return inner_.irecv(buf, count, type, peer, tag); });
  }
  void launch(int tag) override {
    auto it = held_.find(tag);
    if (it == held_.end()) return;
    for (auto& t : it->second) t->inner = t->post();
    held_.erase(it);
    inner_.launch(tag);  // the inner communicator's own launch (NCCL: the group starts here)
    ++launches;
  }
  void wait(RequestPtr& request) override {
    auto* h = dynamic_cast<Held*>(request.get());
    if (!h) return inner_.wait(request);
    if (!h->transfer->inner) {
      ++unlaunched_waits;
      launch(h->tag);
    }
    inner_.wait(h->transfer->inner);
    request.reset();
  }
  bool test(RequestPtr& request) override {
    auto* h = dynamic_cast<Held*>(request.get());
    if (!h) return inner_.test(request);
    if (!h->transfer->inner) return false;
    ++tests_under_way;
    return inner_.test(h->transfer->inner);
  }

 private:
  struct Transfer {
    std::function<RequestPtr()> post;  // the inner isend/irecv, run at launch
    RequestPtr inner;                  // then its request
  };
  struct Held final : Request {
    int tag;
    std::shared_ptr<Transfer> transfer;
  };
  RequestPtr hold(int tag, std::function<RequestPtr()> post) {
    auto h = std::make_unique<Held>();
    h->tag = tag;
    h->transfer = std::make_shared<Transfer>(Transfer{std::move(post), nullptr});
    held_[tag].push_back(h->transfer);
    return h;
  }

  std::map<int, std::vector<std::shared_ptr<Transfer>>> held_;  // by tag, not launched yet
};

// Over another communicator, every all-to-all logged: the bytes this rank sends to
// the others in each call (what the communicator counts).
class AlltoallLog final : public ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  std::vector<std::uint64_t> calls;  // bytes of each call, in order

  void alltoallv(const void* send, const std::vector<std::int64_t>& scounts, const std::vector<std::int64_t>& sdispls,
                 void* recv, const std::vector<std::int64_t>& rcounts, const std::vector<std::int64_t>& rdispls,
                 DType type, CommOp op) override {
    std::uint64_t sent = 0;
    for (int p = 0; p < size(); ++p)
      if (p != rank()) sent += std::uint64_t(scounts[p]) * dtype_bytes(type);
    calls.push_back(sent);
    inner_.alltoallv(send, scounts, sdispls, recv, rcounts, rdispls, type, op);
  }
};

// A strategy that records the all-to-alls each forward and backward of `inner` made
// (from an AlltoallLog under it): one Pass per call of the layer.
template <class T>
class PassLoggingAttention final : public AttentionStrategy<T> {
 public:
  using A = accum_t<T>;
  struct Pass {
    bool backward;
    std::size_t calls;
    std::uint64_t bytes;
  };
  PassLoggingAttention(std::unique_ptr<AttentionStrategy<T>> inner, const AlltoallLog& log, std::vector<Pass>& passes)
      : inner_(std::move(inner)), log_(log), passes_(passes) {}

  Extent2 stats_shape(std::int64_t rows, std::int64_t heads) const override { return inner_->stats_shape(rows, heads); }
  SavedLayout saved_layout(std::int64_t rows, std::int64_t q_cols, std::int64_t kv_cols) const override {
    return inner_->saved_layout(rows, q_cols, kv_cols);
  }
  void forward(const Mat<T>& o, const Mat<A>& stats, const Mat<const T>& q, const Mat<const T>& k,
               const Mat<const T>& v, const AttentionKept<T>& kept) override {
    const auto before = log_.calls.size();
    inner_->forward(o, stats, q, k, v, kept);
    record(false, before);
  }
  // The layer's two-step forward (a non-local saved layout): one pass from the first input to forward_kept.
  void keep_input(int input, const Mat<const T>& x, const AttentionKept<T>& kept) override {
    if (input == 0) forward_start_ = log_.calls.size();
    inner_->keep_input(input, x, kept);
  }
  void forward_kept(const Mat<T>& o, const Mat<A>& stats, const AttentionKept<T>& kept) override {
    inner_->forward_kept(o, stats, kept);
    record(false, forward_start_);
  }
  void backward(const Mat<T>& dq, const Mat<T>& dk, const Mat<T>& dv, const Mat<const T>& d_o, const Mat<const T>& o,
                const Mat<const A>& saved, const Mat<const T>& q, const Mat<const T>& k,
                const Mat<const T>& v) override {
    const auto before = log_.calls.size();
    inner_->backward(dq, dk, dv, d_o, o, saved, q, k, v);
    record(true, before);
  }

 private:
  void record(bool backward, std::size_t before) {
    const auto& c = log_.calls;
    passes_.push_back({backward, c.size() - before, std::accumulate(c.begin() + before, c.end(), std::uint64_t(0))});
  }
  std::unique_ptr<AttentionStrategy<T>> inner_;
  const AlltoallLog& log_;
  std::vector<Pass>& passes_;
  std::size_t forward_start_ = 0;
};

// The ranks [0, n) of the world as a communicator of their own (none on the others).
class SubWorld {
 public:
  explicit SubWorld(int n) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split(MPI_COMM_WORLD, rank < n ? 0 : MPI_UNDEFINED, rank, &comm_);
  }
  ~SubWorld() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  SubWorld(const SubWorld&) = delete;
  SubWorld& operator=(const SubWorld&) = delete;
  bool member() const { return comm_ != MPI_COMM_NULL; }
  MPI_Comm comm() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace

TEST(RingHop, StartLaunchesTheHopFinishLaunchesWhatStartDidNot) {
  MpiCommunicator world(MPI_COMM_WORLD);
  DeferringCommunicator ring(world);
  const int R = ring.size(), me = ring.rank(), next = (me + 1) % R, prev = (me + R - 1) % R;
  std::vector<double> out(1000, double(me)), in(1000, -1.0);
  {
    RingHop hop(ring, nullptr, true);
    hop.receive(in.data(), in.size(), DType::f64, prev, 1);
    hop.send(out.data(), out.size(), DType::f64, next, 1);
    hop.start();
    EXPECT_EQ(ring.launches, 1) << "the hop is under way from start()";
    hop.progress();
    EXPECT_EQ(ring.tests_under_way, 2) << "progress() finds both transfers launched";
    hop.finish();
  }
  EXPECT_EQ(in, std::vector<double>(1000, double(prev)));
  {
    RingHop hop(ring, nullptr, true);  // posted, never started: finish() launches them
    hop.receive(in.data(), in.size(), DType::f64, next, 2);
    hop.send(out.data(), out.size(), DType::f64, prev, 2);
    hop.finish();
  }
  EXPECT_EQ(in, std::vector<double>(1000, double(next)));
  EXPECT_EQ(ring.launches, 2);
  EXPECT_EQ(ring.unlaunched_waits, 0) << "every wait found its transfers launched";
}

TEST(RingHop, RingAttentionExactWithTransfersHeldUntilLaunch) {
  const int P = world_size();
  if (P == 1) GTEST_SKIP() << "a ring needs two ranks";
  auto flash = make("ring " + std::to_string(P) + " flash, transfers held until launch", 1, P);
  auto rsa = make("ring " + std::to_string(P) + " rsa (seed backward), transfers held until launch", 1, P);
  rsa.par.variant = RingVariant::rsa;
  auto rsa_flash = make("ring " + std::to_string(P) + " rsa (flash backward), transfers held until launch", 1, P);
  rsa_flash.par.variant = RingVariant::rsa;
  rsa_flash.par.rsa_backward = RsaBackward::flash;
  auto serial = make("ring " + std::to_string(P) + " no overlap, transfers held until launch", 1, P);
  serial.par.overlap = false;
  for (const auto& c : {flash, rsa, rsa_flash, serial}) {
    const auto cfg = model_of(c);
    ParallelSetup setup(MPI_COMM_WORLD, c.par, c.seq_len);
    const auto geometry = attention_geometry(cfg, c.par, setup.layout(), setup.sp_rank());
    std::vector<std::vector<std::int64_t>> blocks;
    for (int b = 0; b < geometry.R(); ++b) blocks.push_back(setup.layout().group_positions(b));
    DeferringCommunicator ring(setup.ring());
    const AttentionFactory<double> factory = [&](Vec<const std::int64_t>, Vec<const std::int64_t>,
                                                 const SequenceMask& mask) {
      return std::make_unique<RingAttention<double>>(ring, geometry, blocks, mask, c.opts.kernels, nullptr);
    };
    Trainer<double> t(cfg, c.opts, train(), setup.local_positions(), nullptr, factory, ZeroOptions{0, false, P},
                      &setup.world());
    double loss = t.compute_gradients(setup.shard(sequences(c, setup.dp_index())), 1.0 / setup.dp_size());
    loss = reduce_step(t, setup, loss, nullptr);
    const auto ref = reference<double>(c, setup.dp_size());
    EXPECT_NEAR(loss, ref.loss, 1e-10 * std::abs(ref.loss)) << c.name;
    EXPECT_LT(rel_err(host(t.grads().flat()), ref.grads), 1e-10) << c.name;
    EXPECT_GT(ring.launches, 0) << c.name;
    EXPECT_EQ(ring.unlaunched_waits, 0) << c.name << ": a wait found a transfer RingHop had not launched";
    if (c.par.overlap && c.par.variant == RingVariant::flash && !ring.device_ordered())  // NCCL: no host tests
      EXPECT_GT(ring.tests_under_way, 0) << c.name << ": no transfer under way while a block computed";
  }
}

TEST(SequenceParallel, EveryLayoutReproducesTheSingleRankStep) {
  for (const auto& c : cases()) check_case<double>(c);
}

TEST(SequenceParallel, EveryLayoutInBf16WithinTheStatedTolerance) {
  for (const auto& c : cases()) check_case<bf16>(c);
}

namespace {
std::uint64_t op_bytes(const CommBytes& m, CommOp op) { return m[op]; }
}  // namespace

// RSA with the seed's backward (Li et al., "Sequence Parallelism: Long Sequence
// Training from System Perspective", arXiv 2105.13120) on rings of 2, 3 and 4 ranks
// (the first N ranks of the world), with equal blocks (L = 48): the step equals the
// single-rank one (check_case: float64 to 1e-10, bf16 within its tolerance; bytes and
// memory equal to the models), and the volume is the paper's, written here from the
// paper and not from the comm model: per layer the backward sends 2 ring passes of
// N - 1 blocks of B (L/N) Z A elements (V, then K) and two ring all-reduces of the
// [L, Z A] dK and dV partials, 2 (N-1)/N of the buffer each per rank:
//   6 (N-1) B Z (L/N) A elements,   B = 1, Z the kv heads (the paper's heads, MHA), A the head size;
// the forward sends the same 2 passes. The all-reduces sum in fp32 under bf16: there the
// passes' elements take 2 bytes and the all-reduces' 4. The forward keeps P, B Z L^2 / N
// elements per layer (Z the rank's query heads): the activations exceed the flash
// backward's (which keeps the log-sum-exp rows, B Z L / N) by the difference, per layer.
TEST(RsaSeedBackward, ExactOnTwoThreeAndFourRanksWithThePapersVolumeAndMemory) {
  const int world = world_size();
  if (world == 1) GTEST_SKIP() << "a ring needs two ranks";
  for (int N = 2; N <= std::min(4, world); ++N) {
    SubWorld sub(N);
    if (!sub.member()) continue;
    int me = 0;
    MPI_Comm_rank(sub.comm(), &me);
    for (const int kv : {4, 2}) {  // MHA (the paper's setting), GQA (kv heads travel, query heads' P is kept)
      Case c = make("ring " + std::to_string(N) + " rsa seed backward, kv " + std::to_string(kv) + ", L=48", 1, N);
      c.par.variant = RingVariant::rsa;
      c.kv_heads = kv;
      c.seq_len = 48;  // 2N | L: equal zigzag blocks for N = 2, 3, 4
      const auto cfg = model_of(c);
      const std::uint64_t n = std::uint64_t(N), B = 1, L = std::uint64_t(c.seq_len), Z = std::uint64_t(kv),
                          H = std::uint64_t(c.heads), A = std::uint64_t(cfg.head_dim()), layers = std::uint64_t(c.layers);
      const std::uint64_t pass_elements = (n - 1) * B * Z * (L / n) * A;          // one pass of N - 1 blocks
      const std::uint64_t allreduce_elements = 2 * (n - 1) * B * Z * (L / n) * A;  // 2 (N-1)/N of [L, Z A]
      const std::uint64_t paper_elements = 6 * (n - 1) * B * Z * (L / n) * A;  // the paper's, written apart

      // The comm model's RSA backward, every ring member: the paper's volume.
      const SequenceLayout layout(c.seq_len, 1, N, c.par.layout);
      for (int r = 0; r < N; ++r) {
        const auto g = attention_geometry(cfg, c.par, layout, r);
        const auto f64 = ring_layer_bytes(g, {}, 8, 8), b16 = ring_layer_bytes(g, {}, 2, 4);
        EXPECT_EQ(f64.backward + f64.allreduce, paper_elements * 8) << c.name << ", member " << r;
        EXPECT_EQ(b16.backward + b16.allreduce, 2 * pass_elements * 2 + 2 * allreduce_elements * 4) << c.name;
        EXPECT_EQ(f64.forward, 2 * pass_elements * 8) << c.name << ": forward, member " << r;
        // The saved P: B Z L^2 / N elements per layer (Z: the rank's query heads).
        const auto p = g.stats_shape();
        EXPECT_EQ(std::uint64_t(p.rows * p.cols), B * H * L * L / n) << c.name << ": P's elements";
        auto flash_par = c.par;
        flash_par.rsa_backward = RsaBackward::flash;
        const auto seed_mem = predict_rank_memory(cfg, c.opts, c.par, layout, r, 1, Precision::float64, 1.0);
        const auto flash_mem = predict_rank_memory(cfg, c.opts, flash_par, layout, r, 1, Precision::float64, 1.0);
        EXPECT_EQ(seed_mem.bytes.at("activations") - flash_mem.bytes.at("activations"),
                  layers * (B * H * L * L / n - B * H * L / n) * sizeof(double))
            << c.name << ": activations, P against LSE, member " << r;
      }

      // Measured on this rank (forward and backward, full policy): the forward's passes, the backward's.
      for (const bool half : {false, true}) {
        const auto measured = half ? check_case<bf16>(c, sub.comm()) : check_case<double>(c, sub.comm());
        const std::uint64_t T = half ? 2 : 8, acc = half ? 4 : 8;
        const std::uint64_t ring = op_bytes(measured, CommOp::ring), reduce = op_bytes(measured, CommOp::rsa_allreduce);
        EXPECT_EQ(ring, layers * (2 + 2) * pass_elements * T) << c.name << ": ring bytes (2 passes each way)";
        EXPECT_EQ(reduce, layers * 2 * allreduce_elements * acc) << c.name << ": all-reduce bytes";
        const std::uint64_t backward = ring / 2 + reduce;
        if (!half) EXPECT_EQ(backward, layers * paper_elements * 8) << c.name << ": the paper's 6 (N-1) B Z (L/N) A";
        if (me == 0)
          std::printf("    N=%d kv=%d %s: backward sent %llu B per layer (ring %llu + all-reduce %llu); paper "
                      "6 (N-1) B Z (L/N) A = %llu elements\n",
                      N, kv, half ? "bf16" : "f64 ", (unsigned long long)(backward / layers),
                      (unsigned long long)(ring / 2 / layers), (unsigned long long)(reduce / layers),
                      (unsigned long long)paper_elements);
      }
    }
    // The flash backward stays selectable beside it, same ring, same gradients.
    Case f = make("ring " + std::to_string(N) + " rsa flash backward, L=48", 1, N);
    f.par.variant = RingVariant::rsa;
    f.par.rsa_backward = RsaBackward::flash;
    f.seq_len = 48;
    const auto measured = check_case<double>(f, sub.comm());
    EXPECT_EQ(op_bytes(measured, CommOp::rsa_allreduce), 0u) << f.name;
  }
}

// Ulysses keeps q, k, v, o head-sharded, so a layer's backward makes four
// all-to-alls (dO in; dQ, dK, dV out) sending, with equal shards, what the forward's
// four (q, k, v in; o out) send. Logged call by call over the Ulysses group on 2 and 4
// ranks and the 2 x 2 hybrid, with kv heads split, equal to the ranks and replicated;
// checkpoint's recomputed forward makes its four again. The total equals the comm
// model, and the step the single-rank one.
TEST(UlyssesAllToAll, BackwardSendsWhatForwardSendsInFourCalls) {
  const int world = world_size();
  if (world == 1) GTEST_SKIP() << "Ulysses needs two ranks";
  std::vector<Case> cs;
  for (const int U : {2, 4}) {
    if (world % U != 0) continue;
    for (const int kv : {1, 2, 4}) {  // replicated (kv < U), = U, split (kv > U): as U allows
      Case c = make("ulysses " + std::to_string(U) + ", kv " + std::to_string(kv) + ", S=40", U, 1);
      c.kv_heads = kv;
      c.seq_len = 40;
      cs.push_back(c);
    }
    Case k = make("ulysses " + std::to_string(U) + ", checkpoint, S=40", U, 1);
    k.opts.policy = MemoryPolicy::checkpoint;
    k.seq_len = 40;
    cs.push_back(k);
  }
  if (world % 4 == 0)
    for (const int kv : {1, 2}) {
      Case h = make("hybrid 2x2, kv " + std::to_string(kv) + ", S=40", 2, 2);
      h.kv_heads = kv;
      h.seq_len = 40;
      cs.push_back(h);
    }
  for (const auto& c : cs) {
    const auto cfg = model_of(c);
    ParallelSetup setup(MPI_COMM_WORLD, c.par, c.seq_len);
    const auto g = attention_geometry(cfg, c.par, setup.layout(), setup.sp_rank());
    AlltoallLog group(setup.ulysses());
    std::vector<PassLoggingAttention<double>::Pass> passes;
    const AttentionFactory<double> factory = [&](Vec<const std::int64_t>, Vec<const std::int64_t>,
                                                 const SequenceMask& mask) -> std::unique_ptr<AttentionStrategy<double>> {
      std::unique_ptr<AttentionStrategy<double>> inner;
      if (g.R() > 1) {
        std::vector<std::vector<std::int64_t>> blocks;
        for (int b = 0; b < g.R(); ++b) blocks.push_back(setup.layout().group_positions(b));
        inner = std::make_unique<RingAttention<double>>(setup.ring(), g, blocks, mask, c.opts.kernels, nullptr);
      } else {
        inner = std::make_unique<LocalAttention<double>>(setup.layout().group_positions(g.me_ring),
                                                         setup.layout().group_q_lo(g.me_ring, mask), g.head_dim,
                                                         c.opts.kernels);
      }
      auto ulysses = std::make_unique<UlyssesAttention<double>>(group, g, std::move(inner), nullptr);
      return std::make_unique<PassLoggingAttention<double>>(std::move(ulysses), group, passes);
    };
    Trainer<double> t(cfg, c.opts, train(), setup.local_positions(), nullptr, factory,
                      ZeroOptions{0, false, world}, &setup.world());
    double loss = t.compute_gradients(setup.shard(sequences(c, setup.dp_index())), 1.0 / setup.dp_size());
    loss = reduce_step(t, setup, loss, nullptr);
    const auto ref = reference<double>(c, setup.dp_size());
    EXPECT_NEAR(loss, ref.loss, 1e-10 * std::abs(ref.loss)) << c.name;
    EXPECT_LT(rel_err(host(t.grads().flat()), ref.grads), 1e-10) << c.name;

    const int forwards = c.layers * (c.opts.policy == MemoryPolicy::checkpoint ? 2 : 1);
    int n_fwd = 0, n_bwd = 0;
    std::uint64_t total = 0;
    ASSERT_FALSE(passes.empty()) << c.name;
    const std::uint64_t forward_bytes = passes.front().bytes;  // every layer has the same shapes
    for (const auto& p : passes) {
      (p.backward ? n_bwd : n_fwd)++;
      total += p.bytes;
      EXPECT_EQ(p.calls, 4u) << c.name << (p.backward ? ": backward" : ": forward") << " all-to-alls";
      EXPECT_EQ(p.bytes, forward_bytes) << c.name << (p.backward ? ": backward" : ": forward") << " bytes";
    }
    EXPECT_EQ(n_fwd, forwards) << c.name;
    EXPECT_EQ(n_bwd, c.layers) << c.name;
    EXPECT_GT(forward_bytes, 0u) << c.name;
    const auto model = predict_comm_bytes(cfg, c.opts, c.par, setup.layout(), setup.sp_rank(), world, c.grad_accum,
                                          Precision::float64);
    const auto measured = setup.take_comm_bytes();
    EXPECT_EQ(total, model[CommOp::alltoall]) << c.name << ": logged all-to-all bytes against the model";
    EXPECT_EQ(op_bytes(measured, CommOp::alltoall), model[CommOp::alltoall]) << c.name << ": counted against the model";
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
      std::printf("    %-32s forward %d x 4 all-to-alls, backward %d x 4, %llu B each (rank 0)\n", c.name.c_str(),
                  n_fwd, n_bwd, (unsigned long long)forward_bytes);
  }
}

// Packed documents and a sliding window (core/batch.hpp's SequenceMask; ModelOptions::mask):
// key j visible to query i iff q_lo_i <= j <= i, q_lo_i = max(start of i's document, i - w + 1).

TEST(SequenceMask, FirstVisibleAndRotaryPositionsByHand) {
  // Documents [0, 3), [3, 4), [4, 10), [10, 13); window 4.
  for (const auto& starts : {std::vector<std::int64_t>{3, 4, 10}, std::vector<std::int64_t>{0, 3, 4, 10}}) {
    const SequenceMask m{starts, 4};
    const std::vector<std::int64_t> p = minilst::test::iota(13);
    EXPECT_EQ(m.q_lo(p), (std::vector<std::int64_t>{0, 0, 0, 3, 4, 4, 4, 4, 5, 6, 10, 10, 10}));
    EXPECT_EQ(m.rope_positions(p), (std::vector<std::int64_t>{0, 1, 2, 0, 0, 1, 2, 3, 4, 5, 0, 1, 2}));
    EXPECT_TRUE(m.has_documents());
    EXPECT_FALSE(m.causal_only());
    EXPECT_EQ(m.problem(), "");
  }
  const SequenceMask window_only{{}, 3};  // the window alone: rotary positions stay global
  EXPECT_EQ(window_only.q_lo(std::vector<std::int64_t>{0, 1, 2, 7}), (std::vector<std::int64_t>{0, 0, 0, 5}));
  EXPECT_EQ(window_only.rope_positions(std::vector<std::int64_t>{0, 7}), (std::vector<std::int64_t>{0, 7}));
  EXPECT_FALSE(window_only.has_documents());
  EXPECT_TRUE(SequenceMask{}.causal_only());
  EXPECT_TRUE((SequenceMask{{0}, 0}.causal_only())) << "a listed 0 is the first document's start";
  EXPECT_NE((SequenceMask{{3, 3}, 0}.problem()), "");
  EXPECT_NE((SequenceMask{{-1}, 0}.problem()), "");
  EXPECT_NE((SequenceMask{{}, -2}.problem()), "");
  // The layout gives each rank's tokens their q_lo in its own (zigzag) order, and none when causal.
  const SequenceLayout layout(13, 2, 2, RingLayout::zigzag);
  const SequenceMask m{{3, 4, 10}, 4};
  for (int r = 0; r < 2; ++r) {
    const auto pos = layout.group_positions(r), lo = layout.group_q_lo(r, m);
    ASSERT_EQ(lo.size(), pos.size());
    for (std::size_t t = 0; t < pos.size(); ++t) EXPECT_EQ(lo[t], m.q_lo(pos[t])) << "token " << pos[t];
  }
  for (int sp = 0; sp < 4; ++sp) {
    EXPECT_EQ(layout.q_lo(sp, m), m.q_lo(layout.positions(sp)));
    EXPECT_TRUE(layout.q_lo(sp, SequenceMask{}).empty());
  }
}

// One rank, double: a sequence of two packed documents A | B (and a window) gives the loss
// and the gradient of A and B run apart, summed (losses as sums: n_valid = 1). A's last label
// is B's first token, as in the packed sequence (labels across a document's end are not
// ignored yet). RoPE restarts with B; attention scores depend only on i - j, so this checks
// the mask, the rotary positions are checked by hand above. Without the mask the packed
// sequence differs (the check can fail).
TEST(SequenceParallel, PackedDocumentsEqualTheDocumentsApart) {
  Case c = make("packed", 1, 1);
  const auto cfg = model_of(c);
  const std::int64_t a = 17, b = 20, S = a + b;
  const Batch whole = synthetic_batch(cfg.vocab, S, 9, 0, 0);
  const auto part = [&](std::int64_t begin, std::int64_t end) {
    Batch p;
    p.tokens.assign(whole.tokens.begin() + begin, whole.tokens.begin() + end);
    p.labels.assign(whole.labels.begin() + begin, whole.labels.begin() + end);
    p.n_valid = 1;
    return p;
  };
  const auto run = [&](const Batch& batch, const SequenceMask& mask) {
    ModelOptions o;
    o.mask = mask;
    Trainer<double> t(cfg, o, train(), minilst::test::iota(std::int64_t(batch.tokens.size())), nullptr);
    const double loss = t.compute_gradients({batch});
    return Result{loss, host(t.grads().flat())};
  };
  for (const std::int64_t w : {0, 6}) {
    const auto packed = run(part(0, S), SequenceMask{{a}, w});
    const auto A = run(part(0, a), SequenceMask{{}, w}), B = run(part(a, S), SequenceMask{{}, w});
    std::vector<double> sum(A.grads.size());
    for (std::size_t n = 0; n < sum.size(); ++n) sum[n] = A.grads[n] + B.grads[n];
    const std::string tag = "window " + std::to_string(w);
    EXPECT_NEAR(packed.loss, A.loss + B.loss, 1e-12 * std::abs(packed.loss)) << tag;
    EXPECT_LT(rel_err(packed.grads, sum), 1e-10) << tag;
    const auto unmasked = run(part(0, S), SequenceMask{{}, w});
    EXPECT_GT(rel_err(unmasked.grads, sum), 1e-6) << tag << ": the documents' mask changes nothing";
  }
}

// The ring skips the compute of exactly the blocks that no local query sees (a brute-force
// search over every query and key here), and with a window it skips blocks causal attention
// computes (those before the windows).
TEST(SequenceParallel, RingSkipsExactlyTheBlocksNoLocalQuerySees) {
  const int R = world_size();
  if (R == 1) GTEST_SKIP() << "a ring needs two ranks";
  for (const auto layout : {RingLayout::zigzag, RingLayout::contiguous}) {
    Case c = make("ring", 1, R, layout);
    c.seq_len = 64;
    const auto cfg = model_of(c);
    ParallelSetup setup(MPI_COMM_WORLD, c.par, c.seq_len);
    const auto g = attention_geometry(cfg, c.par, setup.layout(), setup.sp_rank());
    std::vector<std::vector<std::int64_t>> blocks;
    for (int b = 0; b < R; ++b) blocks.push_back(setup.layout().group_positions(b));
    const auto& mine = blocks.at(g.me_ring);
    int skipped_by_window = 0;
    for (const SequenceMask& mask : {SequenceMask{}, SequenceMask{{20, 32, 41}, 0}, SequenceMask{{}, 5}, SequenceMask{{33}, 9}}) {
      const RingAttention<double> ring(setup.ring(), g, blocks, mask, c.opts.kernels, nullptr);
      const RingAttention<double> causal(setup.ring(), g, blocks, SequenceMask{}, c.opts.kernels, nullptr);
      for (int b = 0; b < R; ++b) {
        bool seen = false;
        for (const auto i : mine)
          for (const auto j : blocks[b]) seen |= mask.q_lo(i) <= j && j <= i;
        EXPECT_EQ(ring.visible(b), seen) << name_of(layout) << ", member " << g.me_ring << ", block " << b;
        skipped_by_window += causal.visible(b) && !seen;
      }
    }
    if (layout == RingLayout::contiguous && g.me_ring == R - 1)  // the last member's queries: windows far from block 0
      EXPECT_GT(skipped_by_window, 0) << "no block skipped that causal attention computes";
  }
}

// How far each block travels (parallel/ring_reach.hpp), against a brute-force search over
// every query and key: the visibility from ranges equals the query-by-query one, the pairs
// counted in closed form (parallel/mask_pairs.hpp) equal the pairs one by one, and
// reach[b] is the last ring step whose member sees block b. Every layout, rings of 2 to 6,
// causal, documents (one-token ones, one longer than a share), windows smaller and larger
// than a block, a window in some layers (each layer kind's mask), with and without positions.
TEST(RingReach, EachBlockTravelsExactlyToItsLastVisitor) {
  const std::int64_t S = 53;
  const std::vector<SequenceMask> masks = {SequenceMask{},
                                           SequenceMask{{1, 9, 10, 40}, 0},
                                           SequenceMask{{}, 4},
                                           SequenceMask{{}, 30},
                                           SequenceMask{{5, 6, 27}, 7},
                                           SequenceMask{document_starts("lognormal:2.5:1", S, 3), 0}};
  for (const auto& mask : masks)
    for (const auto layout : {RingLayout::contiguous, RingLayout::zigzag, RingLayout::balanced})
      for (int R = 2; R <= 6; ++R) {
        const SequenceLayout l(S, 1, R, layout, true, mask), counted(S, 1, R, layout, false, mask);
        const auto visible = ring_visibility(ring_member_ranges(l), mask);
        const auto reach = ring_reach(l, mask);
        EXPECT_EQ(ring_reach(counted, mask), reach) << "the models' layout (no positions) travels as the run's";
        for (int b = 0; b < R; ++b) {
          int last = 0;
          for (int t = 0; t < R; ++t) {
            const int m = (b + t) % R;
            std::int64_t pairs = 0;  // the visible query-key pairs, one by one
            for (const auto i : l.group_positions(m))
              for (const auto j : l.group_positions(b)) pairs += mask.q_lo(i) <= j && j <= i;
            const bool seen = pairs > 0;
            EXPECT_EQ(visible[m][b], seen) << name_of(layout) << " R " << R << ": member " << m << ", block " << b;
            EXPECT_EQ(visible_pairs(l.group_ranges(m), l.group_ranges(b), mask), double(pairs))
                << name_of(layout) << " R " << R << ": member " << m << "'s pairs with block " << b;
            if (seen && t > 0) last = t;
          }
          EXPECT_EQ(reach[b], last) << name_of(layout) << " R " << R << ", block " << b;
        }
      }
  // Causal, contiguous: block b is seen by the members after it, so it goes R - 1 - b hops;
  // zigzag: every member's late chunk sees every block, which goes all the way round.
  const SequenceLayout contiguous(S, 1, 4, RingLayout::contiguous), zigzag(S, 1, 4, RingLayout::zigzag);
  EXPECT_EQ(ring_reach(contiguous, SequenceMask{}), (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(ring_reach(zigzag, SequenceMask{}), (std::vector<int>{3, 3, 3, 3}));
}

// Documents and a window in every layout on 2, 3 and 4 ranks (the first N of the world):
// contiguous and zigzag rings (flash, RSA with both backwards, the reference kernels),
// Ulysses, the 2 x 2 hybrid; the step equals the single-rank one with the same mask
// (check_case: double to 1e-10, bf16 within its tolerance; memory and bytes equal to the models).
TEST(SequenceParallel, DocumentsAndWindowReproduceTheSingleRankStepOnTwoThreeAndFourRanks) {
  const int world = world_size();
  if (world == 1) GTEST_SKIP() << "sequence parallelism needs two ranks";
  // S = 41: documents [0, 1), [1, 9), [9, 10), [10, 26), [26, 41): one-token ones, odd lengths.
  const SequenceMask docs{{1, 9, 10, 26}, 0}, window{{}, 7}, both{{1, 9, 10, 26}, 5};
  for (int N = 2; N <= std::min(4, world); ++N) {
    SubWorld sub(N);
    if (!sub.member()) continue;
    const std::string n = std::to_string(N);
    std::vector<Case> cs;
    const auto add = [&](Case c, const SequenceMask& mask) {
      c.seq_len = 41;
      c.opts.mask = mask;
      cs.push_back(std::move(c));
    };
    add(make("ring " + n + " zigzag, documents + window 5", 1, N), both);
    add(make("ring " + n + " contiguous, documents, MQA", 1, N, RingLayout::contiguous), docs);
    cs.back().kv_heads = 1;
    add(make("ring " + n + " zigzag, window 7, no overlap, checkpoint", 1, N), window);
    cs.back().par.overlap = false;
    cs.back().opts.policy = MemoryPolicy::checkpoint;
    add(make("ring " + n + " rsa (seed backward), documents + window 5", 1, N), both);
    cs.back().par.variant = RingVariant::rsa;
    add(make("ring " + n + " rsa, flash backward, contiguous, window 7", 1, N, RingLayout::contiguous), window);
    cs.back().par.variant = RingVariant::rsa;
    cs.back().par.rsa_backward = RsaBackward::flash;
    add(make("ring " + n + " reference kernels, documents + window 5", 1, N), both);
    cs.back().opts.kernels.variant = KernelVariant::reference;
    add(make("ulysses " + n + ", documents + window 5", N, 1), both);
    if (N == 3) {  // heads and kv heads the Ulysses degree divides
      cs.back().heads = 6;
      cs.back().kv_heads = 3;
    }
    add(make("ulysses " + n + ", documents, offload alpha 0.37, L=3", N, 1), docs);
    cs.back().opts.policy = MemoryPolicy::offload;
    cs.back().opts.offload.alpha = 0.37;
    cs.back().layers = 3;
    if (N == 3) {
      cs.back().heads = 3;
      cs.back().kv_heads = 3;
    }
    if (N == 4) {
      add(make("hybrid 2x2 zigzag, documents + window 5", 2, 2), both);
      add(make("hybrid 2x2 rsa (seed), contiguous, documents, MQA", 2, 2, RingLayout::contiguous), docs);
      cs.back().par.variant = RingVariant::rsa;
      cs.back().kv_heads = 1;
    }
    for (const auto& c : cs) check_case<double>(c, sub.comm());
    check_case<bf16>(cs.front(), sub.comm());  // the ring with documents and window in bf16
    // Documents that end on the members' edges: no member sees another's block, so no block
    // and no dK/dV accumulator travels (contiguous: the blocks' edges; zigzag: the chunks').
    for (const auto layout : {RingLayout::contiguous, RingLayout::zigzag}) {
      Case c = make("ring " + n + " " + name_of(layout) + ", documents on the blocks' edges", 1, N, layout);
      c.seq_len = 40;
      const int pieces = layout == RingLayout::zigzag ? 2 * N : N;
      for (int e = 1; e < pieces; ++e) c.opts.mask.doc_starts.push_back(40 * e / pieces);
      c.opts.mask.doc_starts.push_back(40 / pieces / 2);  // and one more inside the first piece
      std::sort(c.opts.mask.doc_starts.begin(), c.opts.mask.doc_starts.end());
      const auto measured = check_case<double>(c, sub.comm());
      EXPECT_EQ(op_bytes(measured, CommOp::ring), 0u) << c.name << ": blocks nobody else sees were sent";
    }
  }
}

// The balanced layout (cost-dealt chunks) on 2, 3 and 4 ranks with documents that divide
// nothing, one-token documents, a document longer than a rank's share, and windows
// smaller and larger than a ring block: the step equals the single-rank one (check_case:
// double to 1e-10, bf16 within its tolerance, memory and bytes equal to the models).
TEST(SequenceParallel, BalancedLayoutReproducesTheSingleRankStepOnTwoThreeAndFourRanks) {
  const int world = world_size();
  if (world == 1) GTEST_SKIP() << "sequence parallelism needs two ranks";
  // S = 41: documents [0, 1), [1, 3), [3, 4), [4, 30), [30, 41): 26 tokens > a share of 41 / 2.
  const SequenceMask docs{{1, 3, 4, 30}, 0}, narrow{{1, 3, 4, 30}, 3}, wide{{}, 25};
  for (int N = 2; N <= std::min(4, world); ++N) {
    SubWorld sub(N);
    if (!sub.member()) continue;
    const std::string n = std::to_string(N);
    std::vector<Case> cs;
    const auto add = [&](std::string name, int U, int R, const SequenceMask& mask) {
      Case c = make(std::move(name), U, R, RingLayout::balanced);
      c.seq_len = 41;
      c.opts.mask = mask;
      cs.push_back(std::move(c));
    };
    add("ring " + n + " balanced, documents", 1, N, docs);
    add("ring " + n + " balanced, documents + window 3, MQA", 1, N, narrow);
    cs.back().kv_heads = 1;
    add("ring " + n + " balanced, window 25, no overlap, checkpoint", 1, N, wide);
    cs.back().par.overlap = false;
    cs.back().opts.policy = MemoryPolicy::checkpoint;
    add("ring " + n + " balanced rsa (seed), documents + window 3", 1, N, narrow);
    cs.back().par.variant = RingVariant::rsa;
    add("ulysses " + n + " balanced, documents", N, 1, docs);
    if (N == 3) {
      cs.back().heads = 6;
      cs.back().kv_heads = 3;
    }
    if (N == 4) add("hybrid 2x2 balanced, documents + window 3", 2, 2, narrow);
    for (const auto& c : cs) check_case<double>(c, sub.comm());
    check_case<bf16>(cs.front(), sub.comm());
  }
}

// The work count (attention/attention_work.hpp) against an independent count from the mask:
// for every (query tile, key block) a brute-force search for a visible pair. Where each
// tile's and block's positions are consecutive (contiguous layouts) the kernels' range rule
// is exact, so the counts are equal; elsewhere the range rule may compute a tile with no
// visible pair (never the reverse): at least the brute-force count. Tiles of 1 x 1 (the
// reference kernel) count the visible pairs themselves, and causal attention's FLOPs are
// model/flops.hpp's.
TEST(AttentionWork, ComputedTilesEqualABruteForceCountFromTheMask) {
  const auto brute = [](const std::vector<std::int64_t>& q, const SequenceMask& m, const std::vector<std::int64_t>& k,
                        AttentionTiles t) {
    std::int64_t pairs = 0;
    for (std::size_t i0 = 0; i0 < q.size(); i0 += t.rows)
      for (std::size_t j0 = 0; j0 < k.size(); j0 += t.keys) {
        const std::size_t i1 = std::min(q.size(), i0 + t.rows), j1 = std::min(k.size(), j0 + t.keys);
        bool seen = false;
        for (auto i = i0; i < i1 && !seen; ++i)
          for (auto j = j0; j < j1 && !seen; ++j) seen = m.q_lo(q[i]) <= k[j] && k[j] <= q[i];
        if (seen) pairs += std::int64_t((i1 - i0) * (j1 - j0));
      }
    return pairs;
  };
  const std::int64_t S = 301;
  for (const SequenceMask& m : {SequenceMask{}, SequenceMask{{1, 2, 70, 71, 200}, 0}, SequenceMask{{}, 40},
                                SequenceMask{{90, 91, 250}, 17}}) {
    for (const AttentionTiles t : {AttentionTiles{1, 1}, AttentionTiles{32, 64}, AttentionTiles{22, 64},
                                   AttentionTiles{256, 256}}) {
      for (const auto layout : {RingLayout::contiguous, RingLayout::zigzag, RingLayout::balanced}) {
        const SequenceLayout l(S, 1, 3, layout, true, m);
        for (int a = 0; a < 3; ++a)
          for (int b = 0; b < 3; ++b) {
            const auto q = l.group_positions(a), k = l.group_positions(b);
            const auto counted = computed_tiles(q, l.group_q_lo(a, m), k, t).pairs;
            const auto exact = brute(q, m, k, t);
            const std::string tag = std::string(name_of(layout)) + " " + std::to_string(t.rows) + "x" +
                                    std::to_string(t.keys) + " queries " + std::to_string(a) + " keys " +
                                    std::to_string(b) + " window " + std::to_string(m.window);
            if (layout == RingLayout::contiguous || (t.rows == 1 && t.keys == 1))
              EXPECT_EQ(counted, exact) << tag;
            else
              EXPECT_GE(counted, exact) << tag;
          }
      }
    }
  }
  // One rank, causal, element by element: S(S+1)/2 pairs, flops.hpp's forward and backward.
  ModelConfig cfg;
  cfg.hidden = 32;
  cfg.heads = 4;
  cfg.kv_heads = 2;
  ParallelConfig par;
  const SequenceLayout one(S, 1, 1, RingLayout::zigzag);
  const auto w = attention_work(attention_geometry(cfg, par, one, 0), one, SequenceMask{}, AttentionTiles{1, 1}, 8);
  EXPECT_DOUBLE_EQ(w.flops_forward, attention_flops_forward(S, cfg.hidden));
  EXPECT_DOUBLE_EQ(w.flops_backward, attention_flops_backward(S, cfg.hidden));
}

// Summed over the hops, the bytes the work count says each rank sends are the
// communication model's ring bytes of a layer (forward and backward), on every layout,
// flash and RSA; and the hops' FLOPs add up to the totals.
TEST(AttentionWork, HopBytesAddUpToTheCommunicationModel) {
  ModelConfig cfg;
  cfg.hidden = 32;
  cfg.heads = 4;
  cfg.kv_heads = 2;
  const SequenceMask mask{{5, 6, 40, 90}, 11};
  for (const auto layout : {RingLayout::contiguous, RingLayout::zigzag, RingLayout::balanced})
    for (const auto variant : {RingVariant::flash, RingVariant::rsa})
      for (const int U : {1, 2}) {
        ParallelConfig par;
        par.ulysses = U;
        par.ring = 3;
        par.layout = layout;
        par.variant = variant;
        const SequenceLayout l(133, U, 3, layout, true, mask);
        for (int s = 0; s < U * 3; ++s) {
          const auto g = attention_geometry(cfg, par, l, s);
          const auto w = attention_work(g, l, mask, AttentionTiles{32, 64}, 4);
          const auto model = ring_layer_bytes(g, ring_reach(l, mask), 4, 4);
          double bytes = 0, flops = 0;
          for (int t = 0; t < 3; ++t) {
            bytes += w.hop_bytes_forward[t] + w.hop_bytes_backward[t];
            flops += w.hop_flops_forward[t] + w.hop_flops_backward[t];
          }
          EXPECT_EQ(bytes, double(model.forward + model.backward)) << name_of(layout) << " " << name_of(variant);
          EXPECT_DOUBLE_EQ(flops, w.flops_forward + w.flops_backward);
          EXPECT_GT(w.flops_forward, 0.0);
        }
      }
}

// The acceptance case of the balanced layout, counted (no timing): log-normal documents
// (median e^6.5 ~ 665 tokens, sigma 1: a long tail of documents longer than a rank's
// share) in S = 16384 on a 4-member ring. The attention FLOPs each rank computes
// (the kernels' tiles) have max / mean <= 1.1 under the balanced layout; printed for all.
TEST(SequenceLayout, BalancedLayoutEvensTheAttentionWorkOfLogNormalDocuments) {
  ModelConfig cfg;
  cfg.hidden = 64;
  cfg.heads = 4;
  cfg.kv_heads = 2;
  const std::int64_t S = 16384;
  const int R = 4;
  for (const std::int64_t window : {std::int64_t(0), std::int64_t(1024)}) {
    const SequenceMask mask{document_starts("lognormal:6.5:1", S, 7), window};
    for (const auto layout : {RingLayout::contiguous, RingLayout::zigzag, RingLayout::balanced}) {
      ParallelConfig par;
      par.ring = R;
      par.layout = layout;
      const SequenceLayout l(S, 1, R, layout, true, mask);
      const SequenceLayout counted(S, 1, R, layout, false, mask);
      std::vector<double> flops;
      for (int r = 0; r < R; ++r) {
        EXPECT_EQ(l.tokens(r), counted.tokens(r)) << "the counts without positions (the models') are the layout's";
        ModelOptions opts;
        opts.mask = mask;
        EXPECT_EQ(predict_comm_bytes(cfg, opts, par, l, r, R, 1, Precision::float32),
                  predict_comm_bytes(cfg, opts, par, counted, r, R, 1, Precision::float32))
            << "minilst plan's communication (no positions) is the run's";
        EXPECT_EQ(predict_rank_memory(cfg, opts, par, l, r, 1, Precision::float32, 1.0).bytes,
                  predict_rank_memory(cfg, opts, par, counted, r, 1, Precision::float32, 1.0).bytes)
            << "minilst plan's memory is the run's";
        const auto w = attention_work(attention_geometry(cfg, par, l, r), l, mask, AttentionTiles{32, 64}, 4);
        flops.push_back(w.flops_forward + w.flops_backward);
      }
      const double mean = std::accumulate(flops.begin(), flops.end(), 0.0) / R;
      const double imbalance = *std::max_element(flops.begin(), flops.end()) / mean;
      std::printf("  lognormal:6.5:1, S=%lld, window %lld, %s: attention imbalance %.3f\n", (long long)S,
                  (long long)window, name_of(layout).c_str(), imbalance);
      if (layout == RingLayout::balanced) EXPECT_LE(imbalance, 1.1) << "window " << window;
    }
  }
}

TEST(SequenceLayout, BalancedEveryTokenOnceWithTheContiguousCounts) {
  LayerPattern every_other;  // a window in layers 0, 2, ...: the balanced costs mix both masks
  every_other.every = 2;
  for (const SequenceMask& m :
       {SequenceMask{}, SequenceMask{{3, 4, 50}, 0}, SequenceMask{{}, 6}, SequenceMask{{3, 4, 50}, 6, every_other}})
    for (int U : {1, 2, 3})
      for (int R : {1, 2, 3, 4})
        for (std::int64_t S : {12, 37, 101, 1000}) {
          const SequenceLayout l(S, U, R, RingLayout::balanced, true, m);
          const SequenceLayout contiguous(S, U, R, RingLayout::contiguous, false);
          std::vector<int> seen(S, 0);
          for (int s = 0; s < U * R; ++s) {
            for (auto p : l.positions(s)) seen.at(p)++;
            EXPECT_EQ(l.tokens(s), contiguous.tokens(s)) << "S=" << S << " U=" << U << " R=" << R;
            EXPECT_EQ(std::int64_t(l.positions(s).size()), l.tokens(s));
          }
          EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; })) << "every token once";
          for (int r = 0; r < R; ++r) {
            const auto g = l.group_positions(r);
            EXPECT_TRUE(std::is_sorted(g.begin(), g.end())) << "a member's chunks in position order";
          }
        }
}

TEST(SequenceLayout, EveryTokenOnceBalancedAndZigzag) {
  for (auto layout : {RingLayout::zigzag, RingLayout::contiguous})
    for (int U : {1, 2, 3})
      for (int R : {1, 2, 4})
        for (std::int64_t S : {24, 37, 101}) {
          const SequenceLayout l(S, U, R, layout);
          std::vector<int> seen(S, 0);
          std::size_t lo = S, hi = 0;
          for (int s = 0; s < U * R; ++s) {
            for (auto p : l.positions(s)) seen.at(p)++;
            lo = std::min(lo, l.positions(s).size());
            hi = std::max(hi, l.positions(s).size());
          }
          EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; })) << "every token once";
          EXPECT_LE(hi - lo, 2u) << "balanced: S=" << S << " U=" << U << " R=" << R;
          for (int r = 0; r < R; ++r) {
            const auto g = l.group_positions(r);
            const std::set<std::int64_t> owned(g.begin(), g.end());
            if (layout == RingLayout::zigzag) {  // ring member r owns chunks r and 2R-1-r of 2R
              for (std::int64_t p = 0; p < S; ++p) {
                const auto chunk = [&](std::int64_t c) { return S * c / (2 * R); };
                const bool mine = (p >= chunk(r) && p < chunk(r + 1)) || (p >= chunk(2 * R - 1 - r) && p < chunk(2 * R - r));
                EXPECT_EQ(owned.count(p) == 1, mine) << "zigzag ownership of " << p;
              }
            }
          }
        }
}

TEST(SequenceParallel, InvalidConfigurationsAreNamed) {
  ModelConfig m;
  m.heads = 6;
  m.kv_heads = 3;
  m.hidden = 48;
  ParallelConfig p;
  p.ulysses = 4;
  EXPECT_NE(check_parallel(m, p, 64, 4).find("model.heads (6) is not divisible by the Ulysses degree"), std::string::npos);
  p.ulysses = 2;
  EXPECT_NE(check_parallel(m, p, 64, 2).find("model.kv_heads (3) and parallel.ulysses (2)"), std::string::npos);
  m.kv_heads = 6;
  p.ring = 2;
  EXPECT_NE(check_parallel(m, p, 64, 6).find("world size (6 ranks) is not a multiple"), std::string::npos);
  EXPECT_NE(check_parallel(m, p, 7, 4).find("run.seq_len (7) must be at least 8"), std::string::npos);
  EXPECT_EQ(check_parallel(m, p, 8, 8), "") << "2 data-parallel replicas of a 2x2 grid";
}

namespace {
// Head-chunked Ulysses cases of degree U (U ranks, with a 2 x 2 hybrid on four): GQA with
// the kv heads split among the chunks, one kv head per member shared by every chunk (MQA,
// replicated kv), odd head counts, documents and a window, every memory policy.
std::vector<Case> head_chunk_cases(int U) {
  const std::string n = std::to_string(U);
  const SequenceMask both{{1, 9, 10, 26}, 5};
  std::vector<Case> out;
  const auto add = [&](const std::string& what, int heads, int kv, int chunks, int u = 0, int r = 1) {
    Case c = make("ulysses " + n + " head chunks " + std::to_string(chunks) + ", " + what, u > 0 ? u : U, r);
    c.heads = heads;
    c.kv_heads = kv;
    c.par.ulysses_head_chunks = chunks;
    out.push_back(c);
    return &out.back();
  };
  // heads per member q = 2 (U = 3: 9 heads, 3 per member, odd) and the kv heads per member
  const int q = U == 3 ? 3 : 4, H = q * U;
  add("GQA, kv heads split", H, U == 3 ? 3 * U : 2 * U, U == 3 ? 3 : 2);
  add("MQA (one kv head per member, shared)", H, 1, q);
  auto* d = add("documents + window 5, S=41", H, U, q);
  d->seq_len = 41;
  d->opts.mask = both;
  auto* k = add("checkpoint, chunks 3/2", H, U == 3 ? 3 * U : 2 * U, U == 3 ? 3 : 2);
  k->opts.policy = MemoryPolicy::checkpoint;
  k->opts.mlp_chunks = 3;
  k->opts.lm_head_chunks = 2;
  for (const double alpha : {0.0, 0.37}) {
    auto* o = add("offload alpha " + std::to_string(alpha).substr(0, 4) + ", L=3", H, 1, q);
    o->opts.policy = MemoryPolicy::offload;
    o->opts.offload.alpha = alpha;
    o->layers = 3;
  }
  auto* co = add("checkpoint_offload, grad_accum 2, L=3", H, U == 3 ? 3 * U : 2 * U, U == 3 ? 3 : 2);
  co->opts.policy = MemoryPolicy::checkpoint_offload;
  co->grad_accum = 2;
  co->layers = 3;
  if (U == 4) {  // the hybrid: a ring pass per chunk
    add("hybrid 2x2 zigzag, kv split", 8, 4, 2, 2, 2);
    auto* m = add("hybrid 2x2 zigzag, MQA shared, documents + window 5", 8, 1, 4, 2, 2);
    m->seq_len = 41;
    m->opts.mask = both;
    auto* s = add("hybrid 2x2 rsa (seed backward), kv split, checkpoint", 8, 4, 2, 2, 2);
    s->par.variant = RingVariant::rsa;
    s->opts.policy = MemoryPolicy::checkpoint;
  }
  return out;
}
}  // namespace

// Ulysses over chunks of heads on 2, 3 and 4 ranks (the first N of the world): every layout
// gives the single-rank step (check_case: float64 to 1e-10, bf16 within its tolerance), its
// memory equals the model category by category and its bytes the communication model's; the
// all-to-alls move the unchunked run's bytes, each chunk's part in a call of its own.
TEST(HeadChunkedUlysses, ExactOnTwoThreeAndFourRanksWithTheModelsBytesAndMemory) {
  const int world = world_size();
  if (world == 1) GTEST_SKIP() << "Ulysses needs two ranks";
  for (int N = 2; N <= std::min(4, world); ++N) {
    SubWorld sub(N);
    if (!sub.member()) continue;
    const auto cs = head_chunk_cases(N);
    for (const auto& c : cs) {
      const auto chunked = check_case<double>(c, sub.comm());
      if (c.par.ring > 1) continue;
      Case whole = c;
      whole.par.ulysses_head_chunks = 1;
      whole.name += ", unchunked";
      const auto plain = check_case<double>(whole, sub.comm());
      EXPECT_EQ(op_bytes(chunked, CommOp::alltoall), op_bytes(plain, CommOp::alltoall)) << c.name;
    }
    check_case<bf16>(cs.front(), sub.comm());
    check_case<bf16>(cs[1], sub.comm());
  }
}

TEST(HeadChunkedUlysses, ChunkCountsThatCannotSplitAreNamed) {
  ModelConfig m;
  m.heads = 8;
  m.kv_heads = 4;
  m.hidden = 64;
  ParallelConfig p;
  p.ulysses = 2;  // 4 query heads, 2 kv heads per member
  p.ulysses_head_chunks = 2;
  EXPECT_EQ(check_parallel(m, p, 64, 2), "");
  p.ulysses_head_chunks = 4;  // 4 chunks of 1 query head cannot split 2 kv heads
  EXPECT_NE(check_parallel(m, p, 64, 2).find("parallel.ulysses_head_chunks (4) must divide"), std::string::npos);
  p.ulysses_head_chunks = 3;
  EXPECT_NE(check_parallel(m, p, 64, 2).find("parallel.ulysses_head_chunks (3)"), std::string::npos);
  m.kv_heads = 1;  // one kv head per member: every chunk reads it
  p.ulysses_head_chunks = 4;
  EXPECT_EQ(check_parallel(m, p, 64, 2), "");
  p.ulysses = 1;
  EXPECT_NE(check_parallel(m, p, 64, 1).find("needs parallel.ulysses > 1"), std::string::npos);
  // auto: the largest valid count up to 4; 1 without Ulysses
  p.ulysses_head_chunks = 0;
  EXPECT_EQ(head_chunks(m, p), 1);
  p.ulysses = 2;
  EXPECT_EQ(head_chunks(m, p), 4);
  m.kv_heads = 4;
  EXPECT_EQ(head_chunks(m, p), 2);
  m.heads = 6;
  m.kv_heads = 6;
  m.hidden = 48;
  EXPECT_EQ(head_chunks(m, p), 3);
  // behind a ring, auto only splits the kv heads: 8 heads, 2 kv heads on 2 members share one each
  m.heads = 8;
  m.kv_heads = 2;
  m.hidden = 64;
  EXPECT_EQ(head_chunks(m, p), 4);
  p.ring = 2;
  EXPECT_EQ(head_chunks(m, p), 1);
  m.kv_heads = 4;  // 2 kv heads per member: 2 chunks split them
  EXPECT_EQ(head_chunks(m, p), 2);
}

TEST(UlyssesAuto, TheLargestDegreeTheRanksLeftByTheRingAndTheHeadsAllow) {
  ModelConfig m;
  m.heads = 32;
  m.kv_heads = 8;
  m.hidden = 4096;
  const auto resolved = [&](int world, int ring, int given = 0) {
    ParallelConfig p;
    p.ulysses = given;
    p.ring = ring;
    resolve_ulysses(m, p, world);
    return p.ulysses;
  };
  EXPECT_EQ(resolved(8, 1), 8);
  EXPECT_EQ(resolved(16, 1), 16);  // kv heads replicated (16 % 8 == 0)
  EXPECT_EQ(resolved(64, 1), 32);  // the heads stop it: 2 data-parallel replicas
  EXPECT_EQ(resolved(16, 2), 8);   // 16 ranks, a ring of 2: 8 left
  EXPECT_EQ(resolved(1, 1), 1);
  EXPECT_EQ(resolved(12, 1), 4);   // 12 does not divide 32; 6 does not either; 4 does
  EXPECT_EQ(resolved(6, 4), 1);    // no whole number of ranks per ring member: the world check names it
  EXPECT_EQ(resolved(16, 1, 4), 4);  // a given degree is kept
  m.heads = 6;
  m.kv_heads = 3;
  m.hidden = 48;
  EXPECT_EQ(resolved(4, 1), 1);  // 4 divides no 6; 2 does, but 3 kv heads neither split over 2 nor divide it
  EXPECT_EQ(resolved(6, 1), 6);  // the 3 kv heads replicated twice
}

// The rank grid w = (d P + s) T + t: a tensor-parallel group is T consecutive ranks, the sequence
// groups (Ulysses, ring) gather the ranks of one t, the replicas what is left. Each group's
// members are checked by the sum of their world ranks, every factorisation of the world.
TEST(RankGrid, TensorInnermostThenUlyssesRingAndReplicas) {
  int W = 1, w = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &w);
  const auto member_sum = [&](Communicator& c) {
    Vec<double> v("w", 1);
    Kokkos::deep_copy(v, double(w));
    c.allreduce_sum(v.data(), 1, DType::f64, CommOp::allreduce);
    const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    return h(0);
  };
  for (int T = 1; T <= W; ++T)
    for (int U = 1; T * U <= W; ++U)
      for (int R = 1; T * U * R <= W; ++R) {
        if (W % (T * U * R) != 0) continue;
        ParallelConfig p;
        p.tensor = T, p.ulysses = U, p.ring = R;
        ParallelSetup setup(MPI_COMM_WORLD, p, 64);
        const int P = U * R, t = w % T, s = (w / T) % P, d = w / (P * T), u = s % U, r = s / U;
        const std::string name = "T" + std::to_string(T) + " U" + std::to_string(U) + " R" + std::to_string(R);
        EXPECT_EQ(setup.tensor().size(), T) << name;
        EXPECT_EQ(setup.tensor().rank(), t) << name;
        EXPECT_EQ(setup.ulysses().size(), U) << name;
        EXPECT_EQ(setup.ring().size(), R) << name;
        EXPECT_EQ(setup.sp_rank(), s) << name;
        EXPECT_EQ(setup.dp_size(), W / (P * T)) << name;
        EXPECT_EQ(setup.dp_index(), d) << name;
        EXPECT_EQ(member_sum(setup.tensor()), T * (w - t) + T * (T - 1) / 2.0) << name << ": T consecutive ranks";
        const double base = double(d) * P * T + t;  // world rank of s = 0 in this rank's sequence group
        EXPECT_EQ(member_sum(setup.ulysses()), U * (base + double(r) * U * T) + T * U * (U - 1) / 2.0) << name;
        EXPECT_EQ(member_sum(setup.ring()), R * (base + double(u) * T) + double(U) * T * R * (R - 1) / 2.0) << name;
      }
}
