// The shared vocabulary (src/core/): every enum's name table is complete, its names
// unique and parsed back to the same value; the deck offers exactly those names as a
// key's choices; the phases the metrics file lists are the Phase enum's; a replay in
// a counting memory context allocates nothing and leaves the run's counters alone;
// a tensor-parallel group's slices of the model cover it once (kv heads replicated where
// the group outnumbers them) and shapes the group cannot split are refused by key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include "core/config.hpp"
#include "core/kernel_choice.hpp"
#include "core/parallel_config.hpp"
#include "core/comm_ops.hpp"
#include "core/phases.hpp"
#include "core/tensor_slice.hpp"
#include "io/deck.hpp"
#include "results/metrics.hpp"
#include "memory/memory_context.hpp"
#include "memory/planner.hpp"
#include "predict/memory_model.hpp"
#include "test_util.hpp"

using namespace minilst;

namespace {

// Every value 0..count-1 has one name, names are unique, and each parses back.
template <class E>
void check_names(int count) {
  const auto names = names_of<E>();
  ASSERT_EQ(int(names.size()), count);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size()) << "names are unique";
  for (int v = 0; v < count; ++v) {
    const std::string name = name_of(E(v));
    E back{};
    ASSERT_TRUE(parse_name(name, back)) << name;
    EXPECT_EQ(back, E(v)) << name;
  }
  E untouched = E(0);
  EXPECT_FALSE(parse_name("no-such-name", untouched));
}

std::string deck_file(const std::string& text) {
  const std::string path = "test_core_deck.yaml";
  std::ofstream(path) << text;
  return path;
}

std::string deck_error(const std::vector<std::string>& overrides) {
  try {
    load_deck(deck_file("run:\n  seed: 1234\n"), overrides);
  } catch (const DeckError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Names, EveryEnumHasCompleteUniqueRoundTrippingNames) {
  check_names<Precision>(3);
  check_names<KernelVariant>(2);
  check_names<AttentionKernel>(4);
  check_names<GemmPath>(6);
  check_names<MemoryPolicy>(6);
  check_names<RingLayout>(3);
  check_names<RingVariant>(2);
  check_names<RsaBackward>(2);
  check_names<PlanSolver>(2);
  check_names<Phase>(kNumPhases);
}

TEST(Names, TheDeckOffersExactlyTheEnumsNames) {
  const auto accepts_all = [](const std::string& key, const std::vector<std::string>& names) {
    std::string allowed;
    for (const auto& n : names) {
      EXPECT_EQ(deck_error({key + "=" + n}), "") << key << " = " << n;
      allowed += (allowed.empty() ? "" : "|") + n;
    }
    EXPECT_NE(deck_error({key + "=bogus"}).find("allowed values: " + allowed), std::string::npos) << key;
  };
  accepts_all("run.precision", names_of<Precision>());
  accepts_all("run.kernels", names_of<KernelVariant>());
  accepts_all("run.attention_kernel", names_of<AttentionKernel>());
  accepts_all("run.gemm_bf16", {"auto", "onednn", "avx512_bf16", "fp32_tiles", "cublas"});  // bf16 products' paths
  accepts_all("run.gemm_fp32", {"auto", "blas", "onednn"});
  EXPECT_NE(deck_error({"run.gemm_fp32=avx512_bf16"}), "") << "a bf16 path for fp32 products";
  EXPECT_NE(deck_error({"run.gemm_bf16=blas"}), "") << "the BLAS multiplies fp32 only";
  accepts_all("memory.policy", names_of<MemoryPolicy>());
  accepts_all("parallel.ring_layout", names_of<RingLayout>());
  accepts_all("parallel.ring_variant", names_of<RingVariant>());
  accepts_all("memory.planner_solver", names_of<PlanSolver>());
  const auto d = load_deck(deck_file("run:\n  seed: 1234\n"), {"run.kernels=reference", "memory.policy=vanilla",
                                               "parallel.ring_layout=contiguous", "memory.planner_solver=exact"});
  EXPECT_EQ(d.options.kernels.variant, KernelVariant::reference);
  EXPECT_EQ(d.options.policy, MemoryPolicy::vanilla);
  EXPECT_EQ(d.parallel.layout, RingLayout::contiguous);
  EXPECT_EQ(d.memory.solver, PlanSolver::exact);
  std::remove("test_core_deck.yaml");
}

TEST(Phases, OneTableNamesEveryPhaseInOrderAndTimersAddUp) {
  EXPECT_TRUE(numbered_in_table_order<Phase>()) << "EnumMap<Phase, ...> indexes by the table's order";
  EXPECT_EQ(count_of<Phase>(), std::size_t(kNumPhases));
  EXPECT_EQ(name_of(all_of<Phase>().front()), "step");
  PhaseTimers t;
  t.add(Phase::attention, 0.25);
  t.add(Phase::attention, 0.5);
  t.add(Phase::ring_wait, 1.0);
  EXPECT_EQ(t.get(Phase::attention), 0.75);
  const PhaseSeconds& all = t.seconds();
  EXPECT_EQ(all.values.size(), std::size_t(kNumPhases)) << "every phase is reported, 0 where it did not run";
  EXPECT_EQ(all[Phase::ring_wait], 1.0);
  EXPECT_EQ(all[Phase::mlp], 0.0);
  t.clear();
  EXPECT_EQ(t.get(Phase::attention), 0.0);
}

TEST(CommOps, OneTableNamesEveryOperationAndTheStepsOnesAreTheMetricsFiles) {
  EXPECT_TRUE(numbered_in_table_order<CommOp>());
  std::vector<std::string> step;
  for (const CommOp op : all_of<CommOp>())
    if (step_op(op)) step.push_back(name_of(op));
  EXPECT_EQ(step, (std::vector<std::string>{"alltoall", "ring", "rsa_allreduce", "allreduce", "reduce_scatter", "allgather",
                                            "grad_norm", "tp_allgather", "tp_reduce_scatter", "tp_grad_sum"}))
      << "the metrics file's /comm/<op>: what the readers in analysis/ expect";
}

TEST(CountingMemory, AReplayCountsWithoutAllocatingOrTouchingTheRunsCounters) {
  auto& run = MemoryTracker::instance();
  const auto before = run.device_high_water(), current = run.device_current();
  ModelConfig cfg = test::tiny_config(3);
  cfg.vocab = 1 << 20;       // 2^20 x 24 doubles of embedding: counted, never allocated
  ModelOptions o;
  const auto p = predict_memory(cfg, o, std::int64_t(1) << 30, Precision::float64);  // a billion tokens
  EXPECT_GT(p.at("device_total"), std::uint64_t(1) << 40) << "far more than this machine has";
  EXPECT_EQ(&MemoryTracker::instance(), &run) << "the counting context is gone after the replay";
  EXPECT_EQ(run.device_high_water(), before);
  EXPECT_EQ(run.device_current(), current);
  {
    CountingMemory counting;
    EXPECT_TRUE(counting_only());
    Tracked<Mat<double>> huge(uninitialized, "huge", MemCategory::workspace, std::int64_t(1) << 20, 1 << 20);
    EXPECT_EQ(huge.view().data(), nullptr) << "a shape without memory";
    EXPECT_EQ(huge.view().extent(0), std::size_t(1) << 20);
    EXPECT_EQ(counting.tracker().high_water(MemCategory::workspace), std::uint64_t(8) << 40);
  }
  EXPECT_FALSE(counting_only());
}

TEST(TensorSlice, TheGroupsSlicesCoverTheModelOnceAndEachQueryHeadFindsItsKvHead) {
  ModelConfig m;
  for (const auto& [H, G] : {std::pair{8, 4}, std::pair{8, 8}, std::pair{8, 1}, std::pair{32, 8}, std::pair{8, 2}}) {
    m.heads = H, m.kv_heads = G, m.hidden = 8 * H, m.intermediate = 24, m.vocab = 64;
    for (const int T : {1, 2, 4, 8}) {
      ASSERT_EQ(check_tensor_slice(m, T), "") << H << "/" << G << " on " << T;
      std::vector<int> q(H, 0), kv(G, 0), inter(m.intermediate, 0), vocab(m.vocab, 0);
      for (int t = 0; t < T; ++t) {
        const TensorSlice s = tensor_slice(m, T, t);
        for (int j = s.q_head0; j < s.q_head0 + s.q_heads; ++j) {
          ++q[j];
          const int own_kv = j / (H / G);  // the kv head query head j reads (GQA)
          EXPECT_TRUE(own_kv >= s.kv_head0 && own_kv < s.kv_head0 + s.kv_heads) << "query head " << j << ", rank " << t;
        }
        for (int j = s.kv_head0; j < s.kv_head0 + s.kv_heads; ++j) ++kv[j];
        for (int j = s.intermediate0; j < s.intermediate0 + s.intermediate; ++j) ++inter[j];
        for (int j = s.vocab0; j < s.vocab0 + s.vocab; ++j) ++vocab[j];
        EXPECT_EQ(s.kv_copies, G % T == 0 ? 1 : T / G);
      }
      const auto all = [](const std::vector<int>& v, int k) { return std::all_of(v.begin(), v.end(), [k](int c) { return c == k; }); };
      EXPECT_TRUE(all(q, 1) && all(inter, 1) && all(vocab, 1)) << H << "/" << G << " on " << T << ": split once";
      EXPECT_TRUE(all(kv, G % T == 0 ? 1 : T / G)) << H << "/" << G << " on " << T << ": kv heads once or T/G times";
    }
  }
  m.heads = 8, m.kv_heads = 4, m.intermediate = 24, m.vocab = 64;
  EXPECT_NE(check_tensor_slice(m, 3).find("model.heads (8) is not divisible by parallel.tensor (3)"), std::string::npos);
  m.heads = 12, m.kv_heads = 6;
  EXPECT_NE(check_tensor_slice(m, 4).find("model.kv_heads (6) and parallel.tensor (4)"), std::string::npos);
  m.heads = 8, m.kv_heads = 4, m.intermediate = 20;
  EXPECT_NE(check_tensor_slice(m, 8).find("model.intermediate (20)"), std::string::npos);
  m.intermediate = 24, m.vocab = 100;
  EXPECT_NE(check_tensor_slice(m, 8).find("model.vocab (100)"), std::string::npos);
  EXPECT_THROW(tensor_slice(m, 8, 0), std::logic_error);
  // One rank's model: its share of heads, kv heads, MLP and vocabulary, the head dim and width kept.
  m.hidden = 64, m.heads = 8, m.kv_heads = 2, m.intermediate = 24, m.vocab = 64;
  const ModelConfig local = local_model(m, tensor_slice(m, 4, 3));
  EXPECT_EQ(local.heads, 2);
  EXPECT_EQ(local.kv_heads, 1);
  EXPECT_EQ(local.intermediate, 6);
  EXPECT_EQ(local.vocab, 16);
  EXPECT_EQ(local.hidden, 64);
  EXPECT_EQ(local.head_dim(), 8) << "the model's head dim, not hidden / local heads";
  EXPECT_EQ(local_model(m, tensor_slice(m, 1, 0)).head_dim(), m.head_dim());
}
