// The prediction floor (src/predict/): each phase family of the time model against values
// worked out by hand on small shapes, the machine file's key table (every key read and written
// back, bad files refused naming the key), the device facts, and the plan counted once per run.
//   shape: d = 8, H = 2, G = 1 (h = 4), I = 12, V = 16, S = 16; rates: GEMMs 1 GFLOP/s, attention
//   2 (forward) and 4 (backward) GFLOP/s, 1 GB/s elementwise, 1 us per kernel call.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "io/deck.hpp"
#include "predict/device_facts.hpp"
#include "predict/layout_search.hpp"
#include "predict/machine_file.hpp"
#include "predict/prediction.hpp"
#include "predict/time_model.hpp"
#include "predict/validation.hpp"

using namespace minilst;

namespace {
constexpr double kTol = 1e-12;  // relative: the same sums as the code, in another order

ModelConfig small_model(int layers = 2) {
  ModelConfig c;
  c.hidden = 8, c.heads = 2, c.kv_heads = 1, c.intermediate = 12, c.vocab = 16, c.layers = layers;
  return c;
}

MachineRates small_rates() {
  MachineRates m;
  m.name = "hand";
  m.ranks_per_node = 8;
  for (const Precision p : all_of<Precision>()) {
    for (const GemmClass g : all_of<GemmClass>()) m.gemm_gflops[p][g] = 1;
    m.attention_gflops[p][AttentionPass::forward] = 2;
    m.attention_gflops[p][AttentionPass::backward] = 4;
  }
  m.elementwise_gbs = 1, m.op_overhead_us = 1, m.host_link_gbs = 0.5;
  auto& intra = m.links[LinkScope::intra_node];
  intra[LinkOp::p2p] = {1, 10, 3};
  intra[LinkOp::alltoall] = {2, 15, 0};
  intra[LinkOp::allreduce] = {4, 20, 0};
  intra[LinkOp::allgather] = {3, 10, 0};
  intra[LinkOp::reduce_scatter] = {3, 10, 0};
  return m;
}

PricedStep small_step(MemoryPolicy policy = MemoryPolicy::full, int layers = 2, int U = 1, int R = 1) {
  PricedStep s;
  s.model = small_model(layers);
  s.options.policy = policy;
  s.options.mlp_chunks = s.options.lm_head_chunks = 1;
  s.parallel.ulysses = U, s.parallel.ring = R;
  s.world = U * R;
  s.seq_len = 16;
  s.layout = SequenceLayout(16, U, R, RingLayout::zigzag, false);
  return s;
}

void expect_near(double got, double want, const char* what) {
  EXPECT_NEAR(got, want, kTol * std::abs(want) + 1e-18) << what;
}
}  // namespace

// proj: 2 S (d Hh + 2 d Gh + Hh d) = 2 16 (64 + 64 + 64) = 6144 FLOP; T S (6 d + 2 (Hh + Gh)) = 4 16 72
// = 4608 B. mlp: 2 S 3 d I = 9216 FLOP, its recompute 2 S 2 d I = 6144; T S (3 I + 4 d) = 4352 B forward,
// T S (5 I + 3 I + 6 d) = 9216 B backward (recomputed; 6912 without the 3 I when saved).
TEST(TimeModel, LayerPricesTheProjectionsAndTheMlpByHand) {
  const MachineRates m = small_rates();
  const PricedStep full = small_step(MemoryPolicy::full);
  const LayerPrice f = price_layer(price_context(full, m));
  expect_near(f.proj_fwd, 6144e-9 + 4608e-9 + 8e-6, "proj_fwd");
  expect_near(f.proj_bwd, 2 * 6144e-9 + 2 * 4608e-9 + 14e-6, "proj_bwd");
  expect_near(f.mlp_fwd, 9216e-9 + 4352e-9 + 5e-6, "mlp_fwd");
  expect_near(f.mlp_bwd, (2 * 9216 + 6144) * 1e-9 + 9216e-9 + 10e-6, "mlp_bwd: the gate/up recomputed");
  const LayerPrice v = price_layer(price_context(small_step(MemoryPolicy::vanilla), m));
  expect_near(v.mlp_bwd, 2 * 9216e-9 + 6912e-9 + 10e-6, "mlp_bwd: vanilla keeps the MLP's tensors");
  MachineRates scaled = m;
  scaled.step_scale[Precision::float32][PhaseFamily::other] = 2;
  scaled.step_scale[Precision::float32][PhaseFamily::mlp] = 0.5;
  const LayerPrice k = price_layer(price_context(full, scaled));
  expect_near(k.proj_fwd, 2 * f.proj_fwd, "step_scale.other");
  expect_near(k.mlp_fwd, 0.5 * f.mlp_fwd, "step_scale.mlp");
}

// Another framework's elementwise traffic (framework.*): proj S (hidden d + heads (Hh + Gh)) = 16 (10 x 8 +
// 2 x 12) = 1664 B forward, twice backward; mlp S intermediate I = 16 x 3 x 12 = 576 B forward, 3x in the
// backward when the gate/up are recomputed; the loss S V lm_head = 16 x 16 x 7 B; AdamW 40 B a parameter.
TEST(TimeModel, AnotherFrameworksBytesByHand) {
  MachineRates m = small_rates();
  m.framework.hidden = 10, m.framework.heads = 2, m.framework.intermediate = 3, m.framework.lm_head = 7;
  m.framework.optimizer = 40;
  PricedStep s = small_step(MemoryPolicy::full);
  const LayerPrice f = price_layer(price_context(s, m));
  expect_near(f.proj_fwd, 6144e-9 + 1664e-9 + 8e-6, "proj_fwd");
  expect_near(f.proj_bwd, 2 * 6144e-9 + 2 * 1664e-9 + 14e-6, "proj_bwd");
  expect_near(f.mlp_fwd, 9216e-9 + 576e-9 + 5e-6, "mlp_fwd");
  expect_near(f.mlp_bwd, (2 * 9216 + 6144) * 1e-9 + 3 * 576e-9 + 10e-6, "mlp_bwd");
  expect_near(price_lm_head(price_context(s, m)), 12288e-9 + 16 * 16 * 7e-9 + 8e-6, "lm_head");
  s.optimizer_elements = 1000;
  expect_near(price_optimizer(price_context(s, m)), 40000e-9 + 4e-6, "optimizer");
}

// lm_head: 6 S d V = 12288 FLOP + 4 T S V = 4096 B + 8 calls. AdamW: 1000 elements x 28 B (fp32) at 2 GB/s
// + 4 calls; optimizer offload: the gradient down and weights up, 1000 x (4 + T) B at 0.5 GB/s.
TEST(TimeModel, LmHeadAndOptimizerByHand) {
  MachineRates m = small_rates();
  PricedStep s = small_step();
  expect_near(price_lm_head(price_context(s, m)), 12288e-9 + 4096e-9 + 8e-6, "lm_head");
  s.optimizer_elements = 1000;
  expect_near(price_optimizer(price_context(s, m)), 28000e-9 + 4e-6, "optimizer at elementwise_gbs");
  m.optimizer_gbs = 2;
  expect_near(price_optimizer(price_context(s, m)), 14e-6 + 4e-6, "optimizer at optimizer_gbs");
  s.optimizer_on_host = true;
  expect_near(price_optimizer(price_context(s, m)), 18e-6 + 16e-6, "optimizer offload: the host link both ways");
  s.precision = Precision::bf16;
  expect_near(price_optimizer(price_context(s, m)), 30000e-9 / 2 + 4e-6 + 12e-6, "bf16: 30 B an element, T = 2");
}

// One rank: 136 causal pairs (16 x 17 / 2) x q h = 8: forward 4 x 136 x 8 / 2e9 + 2 calls, backward
// 10 x 136 x 8 / 4e9 + 2 calls. A zigzag ring of 2 (chunks of 4: rank 0 holds 0-3 and 12-15, rank 1
// 4-11): each rank sees 36 pairs in its own block and 32 in the other's; hop 0 sends the own block's
// K and V (2 x 8 rows x 4 x 4 B = 256 B; the backward twice that, with dK, dV) over p2p (10 us + 3 us
// sync + bytes at 1 GB/s) while computing the own block; hop 1 computes the other's, nothing in flight.
TEST(TimeModel, AttentionOnOneRankAndARingOfTwoByHand) {
  const MachineRates m = small_rates();
  const AttentionPrice one = price_attention(price_context(small_step(), m));
  expect_near(one.fwd, 4 * 136 * 8 / 2e9 + 2e-6, "one rank forward");
  expect_near(one.bwd, 10 * 136 * 8 / 4e9 + 2e-6, "one rank backward");
  EXPECT_EQ(one.ring_wait_fwd, 0);
  const AttentionPrice ring = price_attention(price_context(small_step(MemoryPolicy::full, 2, 1, 2), m));
  const double own_f = 4 * 36 * 8 / 2e9 + 2e-6, other_f = 4 * 32 * 8 / 2e9 + 2e-6;
  const double own_b = 10 * 36 * 8 / 4e9 + 2e-6, other_b = 10 * 32 * 8 / 4e9 + 2e-6;
  const double pass_f = (10e-6 + 256e-9) + 3e-6 + other_f, pass_b = (10e-6 + 512e-9) + 3e-6 + other_b;
  expect_near(ring.fwd, pass_f, "ring forward: the hop's transfer, its sync, then the last block");
  expect_near(ring.bwd, pass_b, "ring backward");
  expect_near(ring.ring_wait_fwd, pass_f - (own_f + other_f), "ring_wait forward: the passes less the compute");
  expect_near(ring.ring_wait_bwd, pass_b - (own_b + other_b), "ring_wait backward");
}

// Ulysses over 2: (4 + 4) calls a layer x 2 layers x (15 us) + 2000 B at 2 GB/s; the forward's share 4 of 8;
// under checkpointing the forward's four again (24 calls, share 4 of 12).
TEST(TimeModel, AlltoallCallsByHand) {
  const MachineRates m = small_rates();
  PricedStep s = small_step(MemoryPolicy::full, 2, 2, 1);
  s.comm[CommOp::alltoall] = 2000;
  const AlltoallPrice a = price_alltoall(price_context(s, m));
  expect_near(a.total, 16 * 15e-6 + 1e-6, "alltoall");
  expect_near(a.forward_share, 0.5, "forward share");
  s.options.policy = MemoryPolicy::checkpoint;
  const AlltoallPrice c = price_alltoall(price_context(s, m));
  expect_near(c.total, 24 * 15e-6 + 1e-6, "alltoall, checkpoint");
  expect_near(c.forward_share, 4.0 / 12, "forward share, checkpoint");
  EXPECT_EQ(price_alltoall(price_context(small_step(), m)).total, 0) << "no Ulysses, no all-to-all";
}

// Head-chunked Ulysses over 2 (4 heads, 1 kv head: 2 query heads and the shared kv head per member),
// 2 chunks: q and o, dO and dQ a call per chunk, k and v, dK and dV one each (the kv head every
// chunk reads travels once): (2 x 2 + 2) calls forward, as many backward, a layer; the same bytes.
TEST(TimeModel, AlltoallCallsOfHeadChunksByHand) {
  const MachineRates m = small_rates();
  PricedStep s = small_step(MemoryPolicy::full, 2, 2, 1);
  s.model.heads = 4;
  s.parallel.ulysses_head_chunks = 2;
  s.comm[CommOp::alltoall] = 2000;
  const AlltoallPrice a = price_alltoall(price_context(s, m));
  expect_near(a.total, 24 * 15e-6 + 1e-6, "alltoall, 2 head chunks");
  expect_near(a.forward_share, 0.5, "forward share");
  // On a device, chunk 0's o and dQ gathers move while chunk 1 attends: of a pass's widths 2 q + 2 k
  // = 6 (q = 2, k = 1), the gathers are q forward and q backward, 4 of the two passes' 12, half of
  // them (N - 1 of N chunks) at 2 GB/s; a host's MPI hides nothing.
  expect_near(a.overlappable, 2000.0 * 4 / 12 / 2e9 / 2, "overlappable gathers on a device");
  MachineRates host = m;
  host.host_same_memory = true;
  EXPECT_EQ(price_alltoall(price_context(s, host)).overlappable, 0) << "a host's MPI moves them at the wait";
  s.options.policy = MemoryPolicy::checkpoint;
  const AlltoallPrice c = price_alltoall(price_context(s, m));
  expect_near(c.total, 36 * 15e-6 + 1e-6, "alltoall, 2 head chunks, checkpoint");
  expect_near(c.forward_share, 6.0 / 18, "forward share, checkpoint");
  s.model.kv_heads = 2;  // one kv head per member still (2 over 2): shared
  s.model.heads = 8;     // 4 query heads per member, 4 chunks
  s.parallel.ulysses_head_chunks = 4;
  s.options.policy = MemoryPolicy::full;
  expect_near(price_alltoall(price_context(s, m)).total, 2 * 2 * (2 * 4 + 2) * 15e-6 + 1e-6, "4 chunks");
}

// Checkpointing redoes the attention block; offload at alpha 0.5 over 4 layers with two row buffers
// reuses the buffers of layers 0 and 1: (1 - 0.5) x 2 / 4 = 0.25 of a layer's rows redone, the MLP's
// too (one chunk: the row set holds it).
TEST(TimeModel, RecomputeByHand) {
  const MachineRates m = small_rates();
  const LayerPrice layer{4, 0, 8, 0};
  const AttentionPrice attn{2, 0, 0, 0};
  const RecomputePrice ck = price_recompute(price_context(small_step(MemoryPolicy::checkpoint), m), layer, attn);
  expect_near(ck.layer, 4 + 2, "checkpoint: proj_fwd + attention forward");
  expect_near(ck.attention, 2, "checkpoint: the attention part");
  PricedStep off = small_step(MemoryPolicy::offload, 4);
  off.options.offload.alpha = 0.5;
  const RecomputePrice o = price_recompute(price_context(off, m), layer, attn);
  expect_near(o.mlp, 0.25 * 8, "offload: the MLP's rows");
  expect_near(o.layer, 0.25 * 4 + 0.25 * 8, "offload: the projections' and the MLP's rows");
  EXPECT_EQ(price_recompute(price_context(small_step(MemoryPolicy::full), m), layer, attn).layer, 0);
}

// 4000 B over 4 layers at 0.5 GB/s: 2 us a layer; a forward layer of 1 us hides half of it, a backward
// layer of 3 us all of it, the last copy has nothing behind it: 4 x 1 + 0 + 2 us; busy 2 x 4000 B / 0.5 GB/s.
TEST(TimeModel, OffloadByHand) {
  const MachineRates m = small_rates();
  PricedStep s = small_step(MemoryPolicy::offload, 4);
  s.offload_bytes = 4000;
  const OffloadPrice o = price_offload(price_context(s, m), 1e-6, 3e-6);
  expect_near(o.wait, 4e-6 + 2e-6, "offload_wait");
  expect_near(o.copy_engine_busy, 16e-6, "copy_engine_busy");
  EXPECT_EQ(price_offload(price_context(small_step(), m), 1e-6, 3e-6).wait, 0) << "full keeps everything on the device";
}

// Four data-parallel ranks, 2 layers (4 units: embedding, layers, head). ZeRO 0: an all-reduce of 8000 B
// (20 us + 8000 B at 4 GB/s). ZeRO 2: 4 reduce-scatters of 6000 B in all (4 x 10 us + 2 us), the part
// past a backward of 20 us exposed plus the last one's; 4 all-gathers after AdamW (40 us + 1 us). ZeRO 3:
// 8 all-gathers (80 us + 1 us) beside 30 us of compute: 51 us exposed plus the first call's 81/8 us.
TEST(TimeModel, StatesCollectivesByHand) {
  const MachineRates m = small_rates();
  PricedStep s = small_step();
  s.world = 4;
  s.comm[CommOp::allreduce] = 8000;
  s.comm[CommOp::reduce_scatter] = 6000;
  s.comm[CommOp::allgather] = 3000;
  const StatesPrice z0 = price_states(price_context(s, m), 10e-6, 20e-6);
  expect_near(z0.allreduce, 22e-6, "ZeRO 0 all-reduce");
  expect_near(z0.comm, 22e-6, "ZeRO 0 comm");
  s.parallel.zero = 2;
  const StatesPrice z2 = price_states(price_context(s, m), 10e-6, 20e-6);
  expect_near(z2.last_reduce_scatter, 42e-6 / 4, "the last reduce-scatter");
  expect_near(z2.grad_reduce, (42e-6 - 20e-6) + 42e-6 / 4, "ZeRO 2 grad_reduce");
  expect_near(z2.gather_after, 41e-6, "ZeRO 2 gathers after AdamW");
  expect_near(z2.comm, 42e-6 / 4 + 41e-6, "ZeRO 2 comm");
  s.parallel.zero = 3;
  const StatesPrice z3 = price_states(price_context(s, m), 10e-6, 20e-6);
  expect_near(z3.gather_beside, (81e-6 - 30e-6) + 81e-6 / 8, "ZeRO 3 gathers beside the compute");
  s.world = 1;
  EXPECT_EQ(price_states(price_context(s, m), 10e-6, 20e-6).comm, 0) << "one rank: no collective";
}

// Tensor parallelism over 2 ranks, full policy, one chunk each (M = H = 1), L = 2: gathers a micro-step
// L (1 + M (1 + 2) + 2) + 2 H + 1 = 15 (the MLP recomputes its input: 2 gathers backward), reduce-scatters
// L (1 + 2 M + 1) + H + 1 = 10; each call its share of the operation's time; the gradient sums one call.
TEST(TimeModel, TensorParallelCallsByHand) {
  const MachineRates m = small_rates();
  PricedStep s = small_step();
  s.parallel.tensor = 2, s.world = 2;
  s.comm[CommOp::tp_allgather] = 3000, s.comm[CommOp::tp_reduce_scatter] = 1500, s.comm[CommOp::tp_grad_sum] = 300;
  const TensorPrice t = price_tensor(price_context(s, m));
  // gathers on the allgather link; reduce-scatters on the alltoall link, plus the sum of the T received
  // blocks ((T + 2) / (T - 1) of the bytes sent at 1 GB/s) and its kernel call (1 us)
  const double g = (15 * 10e-6 + 3000 / 3e9) / 15, r = (10 * 15e-6 + 1500 / 2e9 + 1500 * 4 / 1e9) / 10 + 1e-6,
               sums = 10e-6 + 300 / 3e9;
  expect_near(t.total, 15 * g + 10 * r + sums, "tensor_comm");
  expect_near(t.mlp, 3 * g + 2 * r, "the MLP's calls");
  expect_near(t.lm_head, 2 * g + r, "the head's calls");
  expect_near(t.forward, 2 * 2 * (g + r) + 2 * g + r + r, "the forward's calls (attention, MLP, head, embedding)");
  expect_near(t.grad_sum, sums, "the replicated gradients' sum");
  const StepTime step = predict_step_time(s, m);
  expect_near(step.phases[Phase::tensor_comm], t.total, "the phase");
  EXPECT_EQ(price_tensor(price_context(small_step(), m)).total, 0) << "no tensor parallelism, no calls";
}

// The step is its families added up as the run's timers nest them.
TEST(TimeModel, TheStepAddsTheFamiliesUp) {
  const MachineRates m = small_rates();
  PricedStep s = small_step(MemoryPolicy::checkpoint, 2, 2, 1);
  s.grad_accum = 2;
  s.comm[CommOp::alltoall] = 2000;
  s.optimizer_elements = 500;
  s.flops[FlopsConvention::model] = 1e6;
  s.flops[FlopsConvention::hardware] = 1.5e6;
  const StepTime t = predict_step_time(s, m);
  const PriceContext c = price_context(s, m);
  const LayerPrice l = price_layer(c);
  const AttentionPrice a = price_attention(c);
  const AlltoallPrice x = price_alltoall(c);
  const double head = price_lm_head(c);
  const RecomputePrice r = price_recompute(c, l, a);
  const double A = 2, L = 2, fwd_a2a = x.total * x.forward_share;
  expect_near(t.phases[Phase::forward], A * (L * (l.proj_fwd + a.fwd + l.mlp_fwd) + head + 2e-6) + fwd_a2a, "forward");
  expect_near(t.phases[Phase::backward], A * (L * (l.proj_bwd + a.bwd + l.mlp_bwd + r.layer) + 2e-6) + x.total - fwd_a2a,
              "backward");
  expect_near(t.phases[Phase::recompute], A * L * r.layer + fwd_a2a, "recompute: the attention block and its all-to-alls");
  expect_near(t.step_s, t.phases[Phase::forward] + t.phases[Phase::backward] + t.phases[Phase::comm] +
                            t.phases[Phase::optimizer], "step = forward + backward + comm + optimizer");
  EXPECT_EQ(t.phases[Phase::step], t.step_s);
  expect_near(t.tokens_per_s, 16 * 2 / t.step_s, "tokens/s: S x A x data-parallel / step");
  expect_near(t.mfu[FlopsConvention::model], 1e6 / t.step_s / (2 * 1e9), "MFU: model FLOPs over step x ranks x the square GEMM rate");
  expect_near(t.mfu[FlopsConvention::hardware], 1.5e6 / t.step_s / (2 * 1e9), "MFU in the hardware convention");
  const auto f = family_seconds(t.phases);
  expect_near(f[PhaseFamily::other],
              t.phases[Phase::forward] + t.phases[Phase::backward] - t.phases[Phase::attention] - t.phases[Phase::mlp] -
                  t.phases[Phase::lm_head], "family other");
  for (const Phase p : {Phase::grad_reduce_overlap, Phase::param_gather_overlap, Phase::prefetch_wait})
    EXPECT_FALSE(priced_phase(p)) << name_of(p) << " is measured only";
}

namespace {
std::string write_text(const std::string& name, const std::string& text) {
  std::ofstream(name) << text;
  return name;
}

// A value for every expansion of every row (numbers distinct, so a slot mixed up shows).
MachineFile every_key_set() {
  MachineFile m;
  double v = 1;
  for (const auto& row : machine_key_table())
    for (const auto& [key, dims] : expansions(row)) {
      const KeySlot slot = row.slot(m, dims);
      v += 1;
      if (auto* d = std::get_if<double*>(&slot))
        **d = row.id == MachineKey::step_scale || row.id == MachineKey::step_scale_alone ? 1 + v / 1000 : v;
      const bool head_dim = row.id == MachineKey::attention_head_dim || row.id == MachineKey::attention_second_head_dim;
      if (auto* i = std::get_if<int*>(&slot)) **i = head_dim ? 2 * int(v) : int(v);  // a head dim is even
      if (auto* s = std::get_if<std::string*>(&slot)) **s = key == "kind" ? "measured" : "text " + key;
      if (auto* b = std::get_if<bool*>(&slot)) **b = true;
    }
  m.schema = kMachineSchema;
  m.schema_version = kMachineSchemaVersion;
  m.device.clear();
  m.provenance = {{"gemm_gflops", "a"}, {"attention_gflops", "b"}, {"step_scale", "c"}, {"elementwise_gbs", "d"},
                  {"optimizer_gbs", "e"}, {"op_overhead_us", "f"}, {"host_link", "g"}, {"links", "h"},
                  {"framework", "i"}, {"attention_second_gflops", "j"}, {"step_scale_alone", "k"}};
  m.implausible = {"none: \"quoted\", a colon"};
  // every rate (2 to a few hundred) within [1%, 100x] of it: none implausible
  for (const Precision p : all_of<Precision>()) m.nominal_gemm[p] = 10;
  m.link_floor_gbs = 1e-3;
  return m;
}
}  // namespace

TEST(MachineFile, EveryKeyOfTheTableIsWrittenAndReadBack) {
  const MachineFile m = every_key_set();
  EXPECT_EQ(missing_machine_keys(const_cast<MachineFile&>(m)), "") << "every required key set";
  const std::string path = write_text("test_predict_all.yaml", machine_yaml(m));
  const MachineFile back = load_machine_file(path);
  EXPECT_EQ(machine_yaml(back), machine_yaml(m)) << "what is read is what was written";
  MachineFile a = m, b = back;
  for (const auto& row : machine_key_table())
    for (const auto& [key, dims] : expansions(row)) {
      const KeySlot x = row.slot(a, dims), y = row.slot(b, dims);
      std::visit([&](auto* p) { EXPECT_EQ(*p, *std::get<decltype(p)>(y)) << key; }, x);
    }
  std::remove(path.c_str());
}

// The shipped machine files: MINILST_MACHINES (the GPU bundle's copy), else the source tree's.
TEST(MachineFile, TheShippedFilesReadAndWriteBackAlike) {
  const char* env = std::getenv("MINILST_MACHINES");
  const std::string dir = env && *env ? env : std::string(MINILST_SOURCE_DIR) + "/machines";
  for (const char* name : {"h100-sxm-8gpu-ib400", "gh200-4gpu-ib200", "mi300x-8gpu-ib400", "b200-8gpu-ib400",
                           "spr-2s-amx-ndr200"}) {
    const MachineFile m = load_machine_file(dir + "/" + name + ".yaml");
    const std::string path = write_text("test_predict_shipped.yaml", machine_yaml(m));
    EXPECT_EQ(machine_yaml(load_machine_file(path)), machine_yaml(m)) << name;
    std::remove(path.c_str());
  }
}

TEST(MachineFile, BadFilesAreRefusedNamingTheKey) {
  const std::string good = machine_yaml(every_key_set());
  const auto refusal = [](const std::string& text) {
    const std::string path = write_text("test_predict_bad.yaml", text);
    try {
      load_machine_file(path);
    } catch (const std::runtime_error& e) {
      std::remove(path.c_str());
      return std::string(e.what());
    }
    std::remove(path.c_str());
    return std::string("accepted");
  };
  const auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                               : ::testing::AssertionFailure() << "'" << part << "' not in: " << msg;
  };
  EXPECT_TRUE(has(refusal(good + "gpus: 8\n"), "gpus: unknown key (expected one of: schema, schema_version, name"));
  EXPECT_TRUE(has(refusal(good + "gemm_gflops:\n  fp8: {square: 1}\n"), "gemm_gflops.fp8: unknown key (expected one of: float, double, bf16)"));
  EXPECT_TRUE(has(refusal(good + "elementwise_gbs: 3\n"), "elementwise_gbs: given twice"));
  std::string no_latency = good;
  no_latency.replace(no_latency.find(", latency_us:"), std::string(", latency_us:").size(), ", sync_us:");
  EXPECT_TRUE(has(refusal(no_latency), "given twice")) << "sync_us twice";
  std::string bad = good;
  bad.replace(bad.find("ranks_per_node: "), std::string("ranks_per_node: ").size(), "ranks_per_node: 1.5 #");
  EXPECT_TRUE(has(refusal(bad), "ranks_per_node: expected a whole number, got '1.5'"));
  bad = good;
  bad.replace(bad.find("op_overhead_us: "), std::string("op_overhead_us: ").size(), "op_overhead_us: 0x10 #");
  EXPECT_TRUE(has(refusal(bad), "op_overhead_us: expected a number, got '0x10'"));
  bad = good;
  bad.replace(bad.find("elementwise_gbs: "), std::string("elementwise_gbs: ").size(), "elementwise_gbs: -1 #");
  EXPECT_TRUE(has(refusal(bad), "elementwise_gbs: must be > 0"));
  EXPECT_TRUE(has(refusal(good + "device: h100-80gb\n"), "nominal.gemm_gflops.float: 10 GFLOP/s is not the h100-80gb "
                                                         "datasheet's"));
  EXPECT_TRUE(has(refusal(good + "device: tpu\n"), "device: unknown device 'tpu'"));
}

TEST(DeviceFacts, OneRowPerDeviceWithItsMemoryAndPeaks) {
  std::map<std::string, int> names;
  for (const auto& d : device_table()) {
    EXPECT_EQ(++names[d.name], 1) << d.name << " listed twice";
    EXPECT_GT(d.mib, 1024) << d.name;
    EXPECT_GT(d.peak(PeakFormat::bf16), d.peak(PeakFormat::fp64)) << d.name;
    EXPECT_EQ(find_device(d.name), &d);
  }
  const auto named = [](const char* runtime) {
    const DeviceFacts* d = device_of_runtime_name(runtime);
    return std::string(d ? d->name : "none");
  };
  EXPECT_EQ(named("NVIDIA H100 80GB HBM3"), "h100-80gb");
  EXPECT_EQ(named("NVIDIA H100 PCIe"), "h100-pcie");
  EXPECT_EQ(named("NVIDIA H100 NVL"), "h100-94gb");
  EXPECT_EQ(named("NVIDIA GH200 480GB"), "gh200") << "the longest match, not H200's";
  EXPECT_EQ(named("NVIDIA H200"), "h200");
  EXPECT_EQ(named("NVIDIA A100-SXM4-40GB"), "a100-40gb");
  EXPECT_EQ(named("NVIDIA A100-SXM4-80GB"), "a100-80gb");
  EXPECT_EQ(named("NVIDIA A800-SXM4-80GB"), "a800-80gb");
  EXPECT_EQ(named("Tesla V100-SXM2-32GB"), "none");
  EXPECT_EQ(find_device("h100-80gb")->peak(peak_format(Precision::float32)), 67000) << "float: cuBLAS's SGEMM, no TF32";
}

TEST(DeckPlan, ARunsPredictionPlansTheDeckOnce) {
  const Deck deck = built_in_deck({"model.hidden=32", "model.layers=2", "model.heads=4", "model.kv_heads=2",
                                   "model.intermediate=64", "model.vocab=64", "run.seq_len=64", "parallel.ring=2"});
  const long before = deck_plans_made();
  Prediction p;
  EXPECT_EQ(predict_for_run(deck, 2, AvailableMemory{}, p), "");
  EXPECT_EQ(deck_plans_made() - before, 1) << "the run's one plan";
  EXPECT_EQ(p.plan.shape_of.size(), 2u) << "every sequence-parallel rank modelled";
  EXPECT_EQ(p.plan.comm_of.size(), 2u);
  const long remodels = rank_remodels();
  const RankPrediction r = rank_at_alpha(deck, p.plan, 1, p.plan.rank(1).options, p.plan.rank(1).options.offload.alpha);
  EXPECT_EQ(rank_remodels(), remodels) << "the plan's own alpha: nothing re-modelled";
  EXPECT_EQ(r.memory.bytes, p.plan.rank(1).memory.bytes);
  EXPECT_EQ(r.comm, p.plan.comm_of[1]);
  EXPECT_EQ(deck_plans_made() - before, 1) << "reading the prediction plans nothing";
}

// Megatron-LM's FLOP formula as ALST counts its TFLOPS: Llama-3-8B (l 32, h 4096, V 128256), one
// sequence of 1.1M tokens over 8 GPUs in 9:24 gives 575.7 TFLOP/s per GPU (ALST prints 576.1, its
// length rounded); errors against a printed figure are zero within its last digit.
TEST(Validation, MegatronFlopsAndRoundedErrors) {
  const Deck deck = built_in_deck({"model.hidden=4096", "model.layers=32", "model.heads=32", "model.kv_heads=8",
                                   "model.intermediate=14336", "model.vocab=128256", "run.seq_len=1100000",
                                   "parallel.ulysses=8"});
  StepTime t;
  t.step_s = 564;
  PublishedFigure f;
  f.kind = "throughput", f.quantity = "tflops_per_gpu:megatron";
  EXPECT_NEAR(predicted_figure(f, t, deck, StepFlops{}, 8), 575.7, 0.05);
  f.quantity = "tokens_per_s_per_gpu";
  t.tokens_per_s = 8000;
  EXPECT_DOUBLE_EQ(predicted_figure(f, t, deck, StepFlops{}, 8), 1000);
  f.quantity = "bogus";
  EXPECT_THROW(predicted_figure(f, t, deck, StepFlops{}, 8), std::runtime_error);
}

TEST(Validation, RowsOverrideTheMachineAndBadTablesNameTheKey) {
  const std::string machine = write_text("test_predict_validation_machine.yaml", machine_yaml(every_key_set()));
  const MachineFile m = load_machine_file(machine, {"framework.layer_bytes.intermediate=10", "op_overhead_us=7"});
  EXPECT_EQ(m.rates.framework.intermediate, 10);
  EXPECT_EQ(m.rates.op_overhead_us, 7);
  EXPECT_THROW(load_machine_file(machine, {"no_equals_sign"}), std::runtime_error);
  const std::string table = write_text("test_predict_validation.yaml", "tables:\n- id: t\n  paper: P\n  title: T\n"
                                       "  source: S\n  rows:\n  - label: r\n    deck: d.yaml\n    ranks: 1\n"
                                       "    figures:\n    - {kind: speed, quantity: step_s, value: 1, printed: '1', unit: s}\n");
  try {
    load_validation(table);
    ADD_FAILURE() << "a table without a machine read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("tables[0].machine: missing"), std::string::npos) << e.what();
  }
  std::remove(machine.c_str());
  std::remove(table.c_str());
}

// A run of fewer ranks per node than the probe's: step_scale moved from step_scale_alone (1 rank) to
// step_scale (ranks_per_node) in a line: 4 ranks per node, 1.4 alone, 2 all at work, 1.6 with 2 busy.
// Two head dims: forward 100 GFLOP/s at 64 and 60 at 32: per unit of work and head dim t = h / R (0.64
// and 0.533); t(h) = c0 + c1 h through both; at 32 the time per useful FLOP is R1 / R2 =
// 5/3 of the probe's, at 128 two thirds (the per-pair part spread over twice the head dim).
TEST(MachineRates, BusyRanksAndASecondHeadDimByHand) {
  MachineRates m = small_rates();
  m.ranks_per_node = 4;
  m.step_scale[Precision::float32][PhaseFamily::mlp] = 2;
  m.step_scale_alone[Precision::float32][PhaseFamily::mlp] = 1.4;
  expect_near(m.at_busy_ranks(1).scale(Precision::float32, PhaseFamily::mlp), 1.4, "alone");
  expect_near(m.at_busy_ranks(2).scale(Precision::float32, PhaseFamily::mlp), 1.6, "2 of 4 busy");
  expect_near(m.at_busy_ranks(4).scale(Precision::float32, PhaseFamily::mlp), 2, "all busy");
  expect_near(m.at_busy_ranks(1).scale(Precision::float32, PhaseFamily::other), 1, "no factor: 1");
  m.attention_heads_per_kv = 2, m.attention_head_dim = 64, m.attention_second_head_dim = 32;
  m.attention_kernel[Precision::float32] = "onednn";
  m.attention_gflops[Precision::float32][AttentionPass::forward] = 100;
  m.attention_second_gflops[Precision::float32][AttentionPass::forward] = 60;
  expect_near(m.attention_padding(Precision::float32, AttentionPass::forward, 2, 64), 1, "the probe's own");
  expect_near(m.attention_padding(Precision::float32, AttentionPass::forward, 2, 32), 100.0 / 60, "the second point");
  expect_near(m.attention_padding(Precision::float32, AttentionPass::forward, 2, 128), 2.0 / 3, "beyond: the line");
  m.attention_second_head_dim = 0;
  expect_near(m.attention_padding(Precision::float32, AttentionPass::forward, 2, 32), 1, "one point, not portable: 1");
}
