// Whole-model properties, in double:
//  - the model's gradient against central finite differences of its loss;
//  - memory.policy full and checkpoint give the same loss and gradients (1e-12);
//  - chunked MLP / LM head give the unchunked loss and gradients (1e-12);
//  - gradient accumulation is the mean of the micro-batch gradients;
//  - activation high-water per policy equals the analytic model;
//  - data: labels are the next tokens, the last one ignored; all-ignored is 0, not NaN;
//  - a sliding window in some layers (SequenceMask::window_layers): each layer attends
//    with its own mask (in the forward, the backward and the recompute), the gradient
//    against finite differences, the pattern's limits (all layers, none) equal to the
//    window everywhere and nowhere, and its second q_lo set in the memory model;
//  - a tensor-parallel group's parameter slots: each split tensor's parts tile the global
//    tensor once (kv heads T/G times where replicated), the norms whole on every rank, and
//    one rank of one is the model's own layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "attention/local_attention.hpp"
#include "io/deck.hpp"
#include "model/model_states.hpp"
#include "model/documents.hpp"
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

struct Result {
  double loss;
  std::vector<double> grads;
};

Result gradients(const ModelConfig& cfg, const ModelOptions& opts, const std::vector<Batch>& batches) {
  Trainer<double> t(cfg, opts, train_options(), iota(batches[0].tokens.size()), nullptr);
  const double loss = t.compute_gradients(batches);
  return {loss, host(t.grads().flat())};
}

const std::int64_t kSeq = 19;

std::vector<Batch> one_batch() { return {synthetic_batch(29, kSeq, 3, 0, 0)}; }

// The analytic gradient against central finite differences of the loss (eps 1e-5) at
// `per_tensor` entries of every parameter tensor (entry k: offset + (7919 k + shift) mod size):
// their relative error, and how many entries were checked.
std::pair<double, std::size_t> finite_difference_error(const ModelConfig& cfg, const ModelOptions& o,
                                                       const std::vector<Batch>& batches, std::size_t per_tensor,
                                                       std::size_t shift) {
  Trainer<double> t(cfg, o, train_options(), iota(kSeq), nullptr);
  t.compute_gradients(batches);
  const auto grad = host(t.grads().flat());
  auto p = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), t.params().flat());
  const auto set = [&](std::size_t i, double v) {
    p(i) = v;
    Kokkos::deep_copy(t.params().flat(), p);
  };
  std::vector<double> analytic, numeric;
  for (const auto& slot : t.params().slots())
    for (std::size_t k = 0; k < per_tensor; ++k) {
      const std::size_t i = slot.offset + (k * 7919 + shift) % slot.size();
      const double p0 = p(i), eps = 1e-5;
      set(i, p0 + eps);
      const double up = t.compute_gradients(batches);
      set(i, p0 - eps);
      const double down = t.compute_gradients(batches);
      set(i, p0);
      analytic.push_back(grad[i]);
      numeric.push_back((up - down) / (2 * eps));
    }
  return {rel_err(analytic, numeric), analytic.size()};
}

}  // namespace

TEST(Model, GradientMatchesFiniteDifferences) {
  const auto [err, entries] = finite_difference_error(tiny_config(), {}, one_batch(), 3, 0);
  std::printf("model gradient vs finite differences: rel err %.2e over %zu entries\n", err, entries);
  EXPECT_LT(err, 1e-6);
}

TEST(Model, CheckpointGivesFullGradients) {
  const auto cfg = tiny_config(3);
  ModelOptions full, ckpt;
  ckpt.policy = MemoryPolicy::checkpoint;
  const auto a = gradients(cfg, full, one_batch());
  const auto b = gradients(cfg, ckpt, one_batch());
  EXPECT_NEAR(a.loss, b.loss, 1e-12 * std::abs(a.loss));
  EXPECT_LT(rel_err(b.grads, a.grads), 1e-12);
}

TEST(Model, ChunkedMlpAndLmHeadGiveUnchunkedGradients) {
  const auto cfg = tiny_config();
  const auto ref = gradients(cfg, {}, one_batch());
  for (int m : {2, 3, 7, int(kSeq), int(kSeq) + 5}) {  // divisors or not, more chunks than tokens
    ModelOptions o;
    o.mlp_chunks = m;
    o.lm_head_chunks = m + 1;
    const auto r = gradients(cfg, o, one_batch());
    EXPECT_NEAR(r.loss, ref.loss, 1e-12 * std::abs(ref.loss)) << "chunks " << m;
    EXPECT_LT(rel_err(r.grads, ref.grads), 1e-12) << "chunks " << m;
  }
}

TEST(Model, GradientAccumulationIsTheMeanOfMicroBatches) {
  const auto cfg = tiny_config();
  const auto b0 = synthetic_batch(29, kSeq, 3, 0, 0), b1 = synthetic_batch(29, kSeq, 3, 0, 1);
  ASSERT_NE(b0.tokens, b1.tokens);
  const auto r0 = gradients(cfg, {}, {b0}), r1 = gradients(cfg, {}, {b1});
  const auto both = gradients(cfg, {}, {b0, b1});
  std::vector<double> mean(r0.grads.size());
  for (std::size_t i = 0; i < mean.size(); ++i) mean[i] = 0.5 * (r0.grads[i] + r1.grads[i]);
  EXPECT_NEAR(both.loss, 0.5 * (r0.loss + r1.loss), 1e-13);
  EXPECT_LT(rel_err(both.grads, mean), 1e-13);
}

TEST(Model, ActivationHighWaterMatchesAnalyticModel) {
  const auto cfg = tiny_config(4);
  const std::size_t S = kSeq, d = cfg.hidden, h = cfg.head_dim();
  const std::size_t x_all = (cfg.layers + 1) * S * d;  // every layer's input + the final norm's
  const std::size_t per_layer = S * (2 * cfg.heads * h + 2 * cfg.kv_heads * h + cfg.heads + d);  // q,o,k,v,lse,y
  std::size_t high[2];
  for (int p = 0; p < 2; ++p) {
    ModelOptions o;
    o.policy = p == 0 ? MemoryPolicy::full : MemoryPolicy::checkpoint;
    Trainer<double> t(cfg, o, train_options(), iota(S), nullptr);
    auto& tracker = MemoryTracker::instance();
    tracker.reset_high_water();
    t.compute_gradients(one_batch());
    high[p] = tracker.high_water(MemCategory::activations);
    EXPECT_EQ(tracker.current(MemCategory::activations), 0u) << "activations freed after the step";
  }
  EXPECT_EQ(high[0], sizeof(double) * (x_all + cfg.layers * per_layer));
  EXPECT_EQ(high[1], sizeof(double) * (x_all + per_layer));
  EXPECT_LT(high[1], high[0]);
}

TEST(Model, TrainingLowersTheLoss) {
  const auto cfg = tiny_config();
  auto train = train_options();
  train.adamw.lr = 1e-2;
  train.init_std = 0.02;
  Trainer<double> t(cfg, {}, train, iota(kSeq), nullptr);
  const auto batches = one_batch();
  const double first = t.compute_gradients(batches);
  double last = first;
  for (int s = 0; s < 30; ++s) {
    t.apply_optimizer();
    last = t.compute_gradients(batches);
  }
  EXPECT_LT(last, 0.5 * first) << "30 AdamW steps on one batch should at least halve its loss";
}

TEST(Data, LabelsAreTheNextTokensAndTheLastIsIgnored) {
  const auto b = synthetic_batch(50, 64, 11, 2, 1);
  ASSERT_EQ(b.tokens.size(), 64u);
  for (int i = 0; i + 1 < 64; ++i) EXPECT_EQ(b.labels[i], b.tokens[i + 1]);
  EXPECT_EQ(b.labels[63], kIgnoreLabel);
  EXPECT_EQ(b.n_valid, 63);
  for (auto t : b.tokens) EXPECT_TRUE(t >= 0 && t < 50);
  EXPECT_EQ(b.tokens, synthetic_batch(50, 64, 11, 2, 1).tokens) << "reproducible from the seed";
  EXPECT_NE(b.tokens, synthetic_batch(50, 64, 11, 3, 1).tokens) << "a new sequence each step";
}

TEST(Data, PackedDocumentsIgnoreEachDocumentsLastLabel) {
  const std::vector<std::int64_t> starts = document_starts("5 1 20", 64, 7);  // 0 5 6 26 31 32 52 57 58
  EXPECT_EQ(starts, (std::vector<std::int64_t>{5, 6, 26, 31, 32, 52, 57, 58}));
  const auto b = synthetic_batch(50, 64, 11, 2, 1, starts), plain = synthetic_batch(50, 64, 11, 2, 1);
  EXPECT_EQ(b.tokens, plain.tokens) << "the documents change the labels only";
  for (int i = 0; i < 64; ++i) {
    const bool last_of_document = i == 63 || std::count(starts.begin(), starts.end(), i + 1) == 1;
    EXPECT_EQ(b.labels[i], last_of_document ? kIgnoreLabel : b.tokens[i + 1]) << i;
  }
  EXPECT_EQ(b.n_valid, 64 - 1 - std::int64_t(starts.size()));
}

TEST(Data, DocumentLengthsFromListsAndDistributions) {
  EXPECT_TRUE(document_starts("", 100, 1).empty());
  EXPECT_TRUE(document_starts("100", 100, 1).empty()) << "one document of the whole sequence";
  EXPECT_EQ(document_starts("fixed:30", 100, 1), (std::vector<std::int64_t>{30, 60, 90}));
  for (const std::string spec : {"uniform:3:9", "lognormal:2:0.8"}) {
    const auto starts = document_starts(spec, 5000, 42);
    EXPECT_EQ(starts, document_starts(spec, 5000, 42)) << spec << ": reproducible from the seed";
    EXPECT_NE(starts, document_starts(spec, 5000, 43)) << spec << ": another seed, other documents";
    std::int64_t prev = 0;
    for (const auto p : starts) {
      EXPECT_GT(p, prev) << spec;
      EXPECT_LT(p, 5000) << spec;
      if (spec[0] == 'u') EXPECT_TRUE(p - prev >= 3 && p - prev <= 9) << spec;
      prev = p;
    }
  }
  const auto ln = document_starts("lognormal:3:0.5", 200000, 5);  // mean length e^(3 + 0.125) = 22.8
  EXPECT_NEAR(200000.0 / (ln.size() + 1), std::exp(3.125), 1.0);
  for (const std::string bad : {"0 3", "2.5", "x", "fixed:0", "uniform:5:2", "lognormal:1", "gamma:1:2", "fixed:3:4"})
    EXPECT_THROW(document_starts(bad, 100, 1), std::invalid_argument) << bad;
}

TEST(Data, AllIgnoredLabelsGiveZeroLossAndGradientNotNaN) {
  auto b = synthetic_batch(29, kSeq, 3, 0, 0);
  b.labels.assign(kSeq, kIgnoreLabel);
  b.n_valid = 0;
  const auto r = gradients(tiny_config(), {}, {b});
  EXPECT_EQ(r.loss, 0.0);
  for (double g : r.grads) ASSERT_EQ(g, 0.0);
}

// The analytic memory model (memory_model.hpp) against the tracker, byte for
// byte, for both policies and several chunkings, on shapes where a different
// buffer sets the peak (the LM head's logits, the MLP, the attention backward).
TEST(Memory, TrackedHighWaterEqualsTheAnalyticModel) {
  struct Shape { int d, H, G, I, V, L; std::int64_t S; };
  for (const Shape sh : {Shape{24, 4, 2, 36, 29, 2, 19}, Shape{16, 2, 1, 16, 500, 3, 33},
                         Shape{16, 4, 4, 200, 20, 2, 40}, Shape{32, 8, 2, 24, 30, 4, 64}}) {
    ModelConfig cfg;
    cfg.hidden = sh.d; cfg.heads = sh.H; cfg.kv_heads = sh.G; cfg.intermediate = sh.I; cfg.vocab = sh.V;
    cfg.layers = sh.L;
    for (auto policy : {MemoryPolicy::full, MemoryPolicy::checkpoint, MemoryPolicy::vanilla, MemoryPolicy::hf_checkpoint})
      for (int m : {1, 3, 1000}) {
        ModelOptions o;
        o.policy = policy;
        const bool whole = store_buffers(policy, cfg.layers).whole_sequence;  // the baselines have no mini-sequences
        o.mlp_chunks = whole ? 1 : m;
        o.lm_head_chunks = whole ? 1 : (m == 3 ? 5 : m);
        auto& tracker = MemoryTracker::instance();
        ASSERT_EQ(tracker.device_current(), 0u) << "nothing left from earlier tests";
        tracker.reset_high_water();
        {
          Trainer<double> t(cfg, o, train_options(), iota(sh.S), nullptr);
          t.compute_gradients({synthetic_batch(sh.V, sh.S, 1, 0, 0)});
        }
        const auto model = predict_memory(cfg, o, sh.S, Precision::float64);
        const std::string where = "V=" + std::to_string(sh.V) + " I=" + std::to_string(sh.I) + " policy " +
                                  name_of(policy) + " chunks " + std::to_string(m);
        for (auto c : {MemCategory::weights, MemCategory::gradients, MemCategory::optimizer,
                       MemCategory::activations, MemCategory::workspace})
          EXPECT_EQ(tracker.high_water(c), model.at(category_name(c))) << category_name(c) << ", " << where;
        EXPECT_EQ(tracker.device_high_water(), model.at("device_total")) << "device_total, " << where;
      }
  }
}

// Hugging Face's loss (hf_checkpoint, the papers' measured baseline) holds, beside
// the final norm's output, the [S, V] logits in the run's type, their fp32 upcast
// (under bf16 only: fp32 needs none) and the upcast's fp32 gradient; checkpoint with
// one LM-head chunk holds the logits alone. Shapes where the LM head sets the peak.
TEST(Memory, HfCheckpointKeepsTheLogitsTheirUpcastAndItsGradient) {
  ModelConfig cfg;
  cfg.hidden = 32; cfg.heads = 4; cfg.kv_heads = 2; cfg.intermediate = 48; cfg.vocab = 5000; cfg.layers = 2;
  const std::int64_t S = 96;
  ModelOptions hf, ckpt;
  hf.policy = MemoryPolicy::hf_checkpoint;
  ckpt.policy = MemoryPolicy::checkpoint;
  hf.mlp_chunks = hf.lm_head_chunks = ckpt.mlp_chunks = ckpt.lm_head_chunks = 1;
  const std::uint64_t SV = std::uint64_t(S) * cfg.vocab;
  for (auto [precision, extra] : {std::pair{Precision::bf16, 8 * SV}, std::pair{Precision::float32, 4 * SV}}) {
    const auto a = predict_memory(cfg, hf, S, precision), b = predict_memory(cfg, ckpt, S, precision);
    EXPECT_EQ(a.at("workspace") - b.at("workspace"), extra) << name_of(precision);
    EXPECT_EQ(a.at("activations"), b.at("activations")) << name_of(precision);
  }
}

// bf16 mixed precision halves what the papers halve: the activation high-water and
// the host bytes of offload at most 0.55 of fp32's (half, but the attention's LSE
// rows stay fp32); model states 18 bytes per parameter against 16.
TEST(Memory, Bf16HalvesActivationsAndOffloadedBytes) {
  struct Shape { int d, H, G, I, V, L; std::int64_t S; };
  for (const Shape sh : {Shape{48, 6, 2, 80, 97, 2, 48}, Shape{256, 8, 4, 688, 8192, 4, 1024},
                         Shape{64, 4, 1, 172, 500, 3, 301}})
    for (auto policy : {MemoryPolicy::full, MemoryPolicy::checkpoint, MemoryPolicy::vanilla,
                        MemoryPolicy::hf_checkpoint, MemoryPolicy::checkpoint_offload, MemoryPolicy::offload}) {
      ModelConfig cfg;
      cfg.hidden = sh.d; cfg.heads = sh.H; cfg.kv_heads = sh.G; cfg.intermediate = sh.I; cfg.vocab = sh.V;
      cfg.layers = sh.L;
      ModelOptions o;
      o.policy = policy;
      o.offload.alpha = 0.5;
      const auto fp32 = predict_memory(cfg, o, sh.S, Precision::float32);
      const auto bf16 = predict_memory(cfg, o, sh.S, Precision::bf16);
      const std::string where = "d=" + std::to_string(sh.d) + " policy " + name_of(policy);
      EXPECT_LE(double(bf16.at("activations")), 0.55 * double(fp32.at("activations"))) << where;
      EXPECT_LE(double(bf16.at("host_offload")), 0.55 * double(fp32.at("host_offload"))) << where;
      EXPECT_GE(2 * bf16.at("host_offload"), fp32.at("host_offload")) << where;
      const std::uint64_t P = parameter_count(cfg);
      EXPECT_EQ(bf16.at("weights") + bf16.at("gradients") + bf16.at("optimizer"), 18 * P) << where;
      EXPECT_EQ(fp32.at("weights") + fp32.at("gradients") + fp32.at("optimizer"), 16 * P) << where;
    }
}

// The MLP's kept tensors are one chunk of the chunked path (mlp_block.hpp): offload at
// alpha 1 with one MLP chunk keeps them (and everything else) and recomputes nothing,
// full with one chunk keeps nothing and recomputes the chunk; the same operations in
// the same order give the same bits.
TEST(Model, KeptMlpChunkIsTheOneChunkRun) {
  const auto cfg = tiny_config(3);
  ModelOptions full, kept;
  kept.policy = MemoryPolicy::offload;
  kept.offload.alpha = 1.0;
  const auto a = gradients(cfg, full, one_batch());
  const auto b = gradients(cfg, kept, one_batch());
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.grads, b.grads) << "bit for bit";
}

namespace {

// Packed documents of odd lengths and a one-token one over kSeq = 19 tokens: [0, 5),
// [5, 6), [6, 13), [13, 19); a window of 3 in the layers of `layers`.
SequenceMask pattern_mask(std::vector<int> layers, std::int64_t window = 3) {
  SequenceMask m{{5, 6, 13}, window};
  m.window_layers.is_list = true;
  m.window_layers.listed = std::move(layers);
  return m;
}
std::vector<Batch> packed_batch(const SequenceMask& m) { return {synthetic_batch(29, kSeq, 3, 0, 0, m.doc_starts)}; }

std::vector<std::int64_t> ids(const Vec<const std::int64_t>& v) {
  Kokkos::View<std::int64_t*, Kokkos::HostSpace> h("ids", v.extent(0));
  Kokkos::deep_copy(h, v);
  return {h.data(), h.data() + h.extent(0)};
}

// Local attention that logs the window of its mask at every forward ("F3", "F0") and
// backward ("B3"), and checks the q_lo it is given against its mask.
class LoggingAttention final : public AttentionStrategy<double> {
 public:
  LoggingAttention(Vec<const std::int64_t> positions, Vec<const std::int64_t> q_lo, const SequenceMask& mask,
                   int head_dim, std::vector<std::string>* log)
      : inner_(positions, q_lo, head_dim, KernelChoice{}), tag_(std::to_string(mask.window)), log_(log) {
    const auto p = ids(positions), given = ids(q_lo);
    EXPECT_EQ(given, mask.causal_only() ? std::vector<std::int64_t>{} : mask.q_lo(p))
        << "q_lo of the mask with window " << tag_;
  }
  Extent2 stats_shape(std::int64_t rows, std::int64_t heads) const override { return inner_.stats_shape(rows, heads); }
  void forward(const Mat<double>& o, const Mat<double>& stats, const Mat<const double>& q, const Mat<const double>& k,
               const Mat<const double>& v, const AttentionKept<double>& kept) override {
    log_->push_back("F" + tag_);
    inner_.forward(o, stats, q, k, v, kept);
  }
  void backward(const Mat<double>& dq, const Mat<double>& dk, const Mat<double>& dv, const Mat<const double>& d_o,
                const Mat<const double>& o, const Mat<const double>& saved, const Mat<const double>& q,
                const Mat<const double>& k, const Mat<const double>& v) override {
    log_->push_back("B" + tag_);
    inner_.backward(dq, dk, dv, d_o, o, saved, q, k, v);
  }

 private:
  LocalAttention<double> inner_;
  std::string tag_;
  std::vector<std::string>* log_;
};

}  // namespace

// Each layer attends with its own mask: the windowed layers' strategy (window 3) in the
// layers of the pattern, the documents-only one (window 0) elsewhere, in the forward, the
// backward and the checkpoint's recompute; at most two strategies, one per mask.
TEST(WindowPattern, EachLayerAttendsWithItsMask) {
  const auto cfg = tiny_config(4);
  for (const auto policy : {MemoryPolicy::full, MemoryPolicy::checkpoint}) {
    ModelOptions o;
    o.policy = policy;
    o.mask = pattern_mask({1, 2});
    std::vector<std::string> log;
    int made = 0;
    const AttentionFactory<double> factory = [&](Vec<const std::int64_t> pos, Vec<const std::int64_t> q_lo,
                                                 const SequenceMask& mask) -> std::unique_ptr<AttentionStrategy<double>> {
      ++made;
      return std::make_unique<LoggingAttention>(pos, q_lo, mask, cfg.head_dim(), &log);
    };
    Trainer<double> t(cfg, o, train_options(), iota(kSeq), nullptr, factory);
    EXPECT_EQ(made, 2) << "one strategy per mask";
    t.compute_gradients(packed_batch(o.mask));
    const std::vector<std::string> forward = {"F0", "F3", "F3", "F0"};
    std::vector<std::string> expected = forward;
    for (int l = 3; l >= 0; --l) {
      if (policy == MemoryPolicy::checkpoint) expected.push_back(forward[l]);  // the attention block recomputed
      expected.push_back("B" + forward[l].substr(1));
    }
    EXPECT_EQ(log, expected) << name_of(policy);
  }
  // The window everywhere, or nowhere: one strategy, as before there were patterns.
  for (const auto& mask : {SequenceMask{{5}, 3}, pattern_mask({}), SequenceMask{{5}, 0}}) {
    ModelOptions o;
    o.mask = mask;
    int made = 0;
    std::vector<std::string> log;
    const AttentionFactory<double> factory = [&](Vec<const std::int64_t> pos, Vec<const std::int64_t> q_lo,
                                                 const SequenceMask& m) -> std::unique_ptr<AttentionStrategy<double>> {
      ++made;
      return std::make_unique<LoggingAttention>(pos, q_lo, m, cfg.head_dim(), &log);
    };
    Trainer<double> t(cfg, o, train_options(), iota(kSeq), nullptr, factory);
    EXPECT_EQ(made, 1);
  }
}

// The pattern's limits: every layer listed is the window everywhere (the default pattern),
// no layer listed is no window; bit for bit. A pattern in between differs from both, and
// moving the window to another layer changes the result.
TEST(WindowPattern, AllLayersIsTheWindowEverywhereAndNoneIsNoWindow) {
  const auto cfg = tiny_config(3);
  const auto run = [&](const SequenceMask& mask) {
    ModelOptions o;
    o.mask = mask;
    return gradients(cfg, o, packed_batch(mask));
  };
  SequenceMask every = pattern_mask({}), alternate = pattern_mask({});
  every.window_layers = LayerPattern{};  // all
  alternate.window_layers = LayerPattern{2, 0, {}, false};  // every:2 = layers 0, 2
  const auto all = run(every), listed = run(pattern_mask({0, 1, 2})), none = run(pattern_mask({}));
  const auto no_window = run(SequenceMask{{5, 6, 13}, 0});
  EXPECT_EQ(listed.loss, all.loss);
  EXPECT_EQ(listed.grads, all.grads);
  EXPECT_EQ(none.loss, no_window.loss);
  EXPECT_EQ(none.grads, no_window.grads);
  const auto some = run(alternate), same = run(pattern_mask({0, 2})), other = run(pattern_mask({1}));
  EXPECT_EQ(some.grads, same.grads) << "every:2 is layers 0 and 2";
  EXPECT_GT(rel_err(some.grads, all.grads), 1e-6) << "layer 1's window changes nothing";
  EXPECT_GT(rel_err(some.grads, none.grads), 1e-6) << "layers 0 and 2's window changes nothing";
  EXPECT_GT(rel_err(other.grads, all.grads), 1e-6);
  EXPECT_GT(rel_err(other.grads, none.grads), 1e-6);
  EXPECT_GT(rel_err(other.grads, some.grads), 1e-6);
  // A listed layer the model lacks is refused, naming it.
  ModelOptions bad;
  bad.mask = pattern_mask({0, 3});
  try {
    Trainer<double> t(cfg, bad, train_options(), iota(kSeq), nullptr);
    ADD_FAILURE() << "layer 3 of 3 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("layer 3 is out of range"), std::string::npos) << e.what();
  }
}

// The gradient of a model with the window in layer 1 of 3 only, packed documents,
// checkpointed, against central finite differences of its loss.
TEST(WindowPattern, GradientMatchesFiniteDifferences) {
  ModelOptions o;
  o.policy = MemoryPolicy::checkpoint;
  o.mask = pattern_mask({1}, 2);
  const auto [err, entries] = finite_difference_error(tiny_config(3), o, packed_batch(o.mask), 2, 11);
  std::printf("window pattern gradient vs finite differences: rel err %.2e over %zu entries\n", err, entries);
  EXPECT_LT(err, 1e-6);
}

// The pattern's second q_lo set [S] lives as long as the trainer: the workspace high-water
// grows by exactly its bytes, and the memory model predicts every category to the byte.
TEST(WindowPattern, SecondMaskBufferIsInTheMemoryModel) {
  const auto cfg = tiny_config(3);
  std::uint64_t workspace[2] = {0, 0};
  for (const auto policy : {MemoryPolicy::full, MemoryPolicy::checkpoint, MemoryPolicy::offload})
    for (int split = 0; split < 2; ++split) {
      ModelOptions o;
      o.policy = policy;
      o.offload.alpha = 0.5;
      o.mask = split ? pattern_mask({0, 2}) : pattern_mask({0, 1, 2});
      auto& tracker = MemoryTracker::instance();
      ASSERT_EQ(tracker.device_current(), 0u);
      tracker.reset_high_water();
      {
        Trainer<double> t(cfg, o, train_options(), iota(kSeq), nullptr);
        t.compute_gradients(packed_batch(o.mask));
      }
      const auto model = predict_memory(cfg, o, kSeq, Precision::float64);
      const std::string where = std::string(name_of(policy)) + (split ? ", layers 0 2" : ", every layer");
      for (int c = 0; c < kNumMemCategories; ++c)
        EXPECT_EQ(tracker.high_water(MemCategory(c)), model.at(category_name(MemCategory(c))))
            << category_name(MemCategory(c)) << ", " << where;
      workspace[split] = tracker.high_water(MemCategory::workspace);
      if (split) EXPECT_EQ(workspace[1] - workspace[0], kSeq * sizeof(std::int64_t)) << where;
    }
}

TEST(Parameters, TensorParallelSlotsTileEachGlobalTensor) {
  ModelConfig m;
  m.hidden = 32, m.heads = 8, m.layers = 2, m.intermediate = 48, m.vocab = 64;
  for (const int G : {4, 2}) {
    m.kv_heads = G;
    const auto whole = parameter_layout(m);
    for (const int T : {1, 2, 4}) {
      std::vector<std::vector<std::size_t>> covered(whole.size());  // per slot, per index along the split
      for (int t = 0; t < T; ++t) {
        const auto slots = parameter_layout(m, tensor_slice(m, T, t));
        ASSERT_EQ(slots.size(), whole.size());
        std::size_t offset = 0;
        for (std::size_t i = 0; i < slots.size(); ++i) {
          const TensorSlot& s = slots[i];
          EXPECT_EQ(s.name, whole[i].name);
          EXPECT_EQ(s.global_shape, whole[i].shape) << s.name;
          EXPECT_EQ(s.offset, offset) << s.name << ": slots packed in dump order";
          offset += s.size();
          const bool norm = s.shape.size() == 1;
          if (norm || T == 1) EXPECT_EQ(s.split_dim, -1) << s.name;
          else EXPECT_GE(s.split_dim, 0) << s.name << ": split on " << T << " ranks";
          if (s.split_dim < 0) {
            EXPECT_EQ(s.shape, s.global_shape) << s.name << ": whole on every rank";
            continue;
          }
          auto& c = covered[i];
          c.resize(s.global_shape[s.split_dim], 0);
          for (std::size_t j = 0; j < s.shape[s.split_dim]; ++j) ++c.at(s.split_begin + j);
          EXPECT_EQ(s.shape[1 - s.split_dim], s.global_shape[1 - s.split_dim]) << s.name << ": the other dim whole";
        }
      }
      for (std::size_t i = 0; i < whole.size(); ++i) {
        if (covered[i].empty()) continue;
        const bool kv = whole[i].name.find(".wk") != std::string::npos || whole[i].name.find(".wv") != std::string::npos;
        const std::size_t times = kv && G % T != 0 ? std::size_t(T / G) : 1;
        for (const std::size_t n : covered[i]) EXPECT_EQ(n, times) << whole[i].name << " on " << T << " ranks";
      }
    }
  }
}

// Initial values do not depend on a tensor-parallel split: each rank's rows or columns are the
// whole model's, drawn from the same streams (norms perturbed, so they are checked too).
TEST(Parameters, TensorParallelInitialValuesAreTheWholeModelsSlices) {
  ModelConfig m;
  m.hidden = 32, m.heads = 8, m.kv_heads = 2, m.layers = 1, m.intermediate = 48, m.vocab = 64;
  TrainOptions init;
  init.norm_init_noise = 0.1;
  const auto whole = parameter_layout(m);
  for (const int T : {2, 4}) {
    for (int t = 0; t < T; ++t) {
      const auto slots = parameter_layout(m, tensor_slice(m, T, t));
      for (std::size_t i = 0; i < slots.size(); ++i) {
        std::vector<double> full(whole[i].size()), part(slots[i].size());
        for (std::size_t c = 0; c < initial_chunks(whole[i]); ++c) draw_initial_chunk(whole[i], c, init, full.data());
        for (std::size_t c = 0; c < initial_chunks(slots[i]); ++c) draw_initial_chunk(slots[i], c, init, part.data());
        const auto& s = slots[i];
        const std::size_t cols = s.shape.size() == 2 ? s.shape[1] : 1, gcols = s.shape.size() == 2 ? s.global_shape[1] : 1;
        for (std::size_t k = 0; k < part.size(); ++k) {
          std::size_t row = k / cols, col = k % cols;
          if (s.split_dim == 0) row += s.split_begin;
          if (s.split_dim == 1) col += s.split_begin;
          ASSERT_EQ(part[k], full[row * gcols + col]) << s.name << " on rank " << t << " of " << T << ", element " << k;
        }
      }
    }
  }
}
