// The input deck: defaults, overrides, the resolved YAML, and that every bad
// value is refused with a message naming the key and what is allowed.
// (tests/app/bad_decks.sh checks the same through the minilst binary.)
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/kernel_choice.hpp"
#include "io/deck.hpp"

using namespace minilst;

namespace {

// The decks of this run live in one scratch directory, removed at exit.
struct ScratchDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("minilst_test_deck_" + std::to_string(::getpid()));
  ScratchDir() { std::filesystem::create_directories(path); }
  ~ScratchDir() { std::filesystem::remove_all(path); }
};

std::string write_deck(const std::string& text) {
  static ScratchDir dir;
  static int n = 0;
  const auto path = (dir.path / ("deck_" + std::to_string(n++) + ".yaml")).string();
  std::ofstream(path) << text;
  return path;
}

// The message of the DeckError that loading raises ("" if none).
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    load_deck(write_deck(text), overrides);
  } catch (const DeckError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Deck, EmptyDeckGivesDefaults) {
  const auto d = load_deck(write_deck("run:\n  seed: 1234\n"), {});
  EXPECT_EQ(d.model.hidden % d.model.heads, 0);
  EXPECT_EQ(d.run.precision, Precision::float32);
  EXPECT_EQ(d.options.kernels.variant, KernelVariant::optimized);
  EXPECT_EQ(d.options.kernels.attention, AttentionKernel::automatic);  // the run resolves the autos
  EXPECT_EQ(d.options.kernels.gemm_bf16, GemmPath::automatic);
  EXPECT_EQ(d.options.kernels.gemm_fp32, GemmPath::automatic);
  EXPECT_EQ(d.options.policy, MemoryPolicy::full);
  EXPECT_EQ(d.output.metrics, "auto");
  EXPECT_EQ(d.output.dump, "");
}

TEST(Deck, ValuesAndOverrides) {
  const auto d = load_deck(write_deck("model:\n  hidden: 64\n  heads: 4\n  kv_heads: 1\nrun:\n  seq_len: 99\n"),
                           {"run.seq_len=123", "memory.policy=checkpoint", "run.precision=double"});
  EXPECT_EQ(d.model.hidden, 64);
  EXPECT_EQ(d.model.kv_heads, 1);
  EXPECT_EQ(d.run.seq_len, 123) << "--set wins over the file";
  EXPECT_EQ(d.options.policy, MemoryPolicy::checkpoint);
  EXPECT_EQ(d.run.precision, Precision::float64);
}

TEST(Deck, ChunkCountsAreIntegersOrAuto) {
  const auto d = load_deck(write_deck("mst:\n  mlp_chunks: 7\n"), {"mst.chunk_budget_mib=0.5"});
  EXPECT_FALSE(d.mst.mlp.automatic);
  EXPECT_EQ(d.mst.mlp.count, 7);
  EXPECT_TRUE(d.mst.lm_head.automatic) << "auto is the default";
  EXPECT_EQ(d.mst.budget_mib, 0.5);
}

TEST(Deck, OffloadKeys) {
  const auto d = load_deck(write_deck("memory:\n  policy: offload\n"), {});
  EXPECT_EQ(d.options.policy, MemoryPolicy::offload);
  EXPECT_TRUE(d.memory.alpha_auto) << "alpha auto is the default";
  EXPECT_TRUE(d.memory.host_budget_auto);
  EXPECT_EQ(d.options.offload.bandwidth_gbs, 0.0);
  const auto e = load_deck(write_deck("memory:\n  policy: checkpoint_offload\n"),
                           {"memory.offload_alpha=0.37", "memory.offload_bandwidth_gbs=16", "memory.host_budget_mib=512"});
  EXPECT_EQ(e.options.policy, MemoryPolicy::checkpoint_offload);
  EXPECT_FALSE(e.memory.alpha_auto);
  EXPECT_EQ(e.options.offload.alpha, 0.37);
  EXPECT_EQ(e.options.offload.bandwidth_gbs, 16.0);
  EXPECT_EQ(e.memory.host_budget_mib, 512.0);
  EXPECT_NE(error_of("memory:\n  offload_alpha: 1.01\n").find("memory.offload_alpha = '1.01': must be in [0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of("memory:\n  offload_bandwidth_gbs: -1\n").find("memory.offload_bandwidth_gbs"), std::string::npos);
  EXPECT_NE(error_of("memory:\n  host_budget_mib: lots\n").find("expected a finite number or 'auto'"),
            std::string::npos);
  EXPECT_NE(error_of("memory:\n  policy: swap\n").find("full|checkpoint|hf_checkpoint|checkpoint_offload|offload|vanilla"),
            std::string::npos);
}

TEST(Deck, ResolvedYamlHoldsEveryKeyAndReloads) {
  const auto d = load_deck(write_deck("model:\n  layers: 3\n"), {"run.steps=5"});
  const auto y = YAML::Load(d.resolved_yaml);
  EXPECT_EQ(y["model"]["layers"].as<int>(), 3);
  EXPECT_EQ(y["run"]["steps"].as<int>(), 5);
  for (const char* s : {"model", "run", "mst", "memory", "output"}) EXPECT_TRUE(y[s].IsMap()) << s;
  const auto again = load_deck(write_deck(d.resolved_yaml), {});
  EXPECT_EQ(again.resolved_yaml, d.resolved_yaml) << "the resolved deck is a valid deck of the same run";
}

TEST(Deck, EmptySectionsAndKeylessDecksAreRefused) {  // an indentation slip or a file cut short
  EXPECT_NE(error_of("memory:\nrun:\n  steps: 3\n").find("section 'memory' is empty"), std::string::npos);
  EXPECT_NE(error_of("memory: {}\nrun:\n  steps: 3\n").find("section 'memory' is empty"), std::string::npos);
  EXPECT_NE(error_of("{}\n").find("sets no key"), std::string::npos);
  EXPECT_NE(error_of("{}\n", {"run.steps=3"}).find("sets no key"), std::string::npos);
  EXPECT_EQ(error_of("run:\n  steps: 3\n"), "");  // a missing section takes its defaults
}

TEST(Deck, MeaninglessValuesAreRefusedWithTheRule) {
  EXPECT_NE(error_of("model:\n  norm_eps: 1e300\n").find("model.norm_eps = '1e300': must be in [0, 0.1]"),
            std::string::npos);
  EXPECT_NE(error_of("memory:\n  offload_bandwidth_gbs: 1e-300\n").find("a cap below 0.001 GB/s"), std::string::npos);
  EXPECT_EQ(error_of("memory:\n  offload_bandwidth_gbs: 0\n"), "");  // unthrottled
}

TEST(Deck, ErrorsNameTheKeyAndTheRule) {
  EXPECT_NE(error_of("model:\n  hiden: 8\n").find("unknown key 'model.hiden'"), std::string::npos);
  EXPECT_NE(error_of("model:\n  hidden: 40\n  heads: 6\n").find("model.hidden (40) is not divisible by model.heads (6)"),
            std::string::npos);
  EXPECT_NE(error_of("model:\n  heads: 8\n  kv_heads: 3\n").find("model.heads (8) is not divisible by model.kv_heads (3)"),
            std::string::npos);
  EXPECT_NE(error_of("run:\n  seq_len: 1\n").find("run.seq_len = '1': must be in [2, 1099511627776]"), std::string::npos);
  EXPECT_NE(error_of("model:\n  hidden: -4\n").find("model.hidden = '-4': must be in [1, 1048576]"), std::string::npos);
  EXPECT_NE(error_of("model:\n  intermediate: 1e3\n").find("expected an integer"), std::string::npos);
  EXPECT_NE(error_of("model:\n  rope_theta: 0\n").find("model.rope_theta = '0': must be > 0"), std::string::npos);
  EXPECT_NE(error_of("run:\n  precision: fp16\n").find("allowed values: float|double|bf16"), std::string::npos);
  EXPECT_NE(error_of("model:\n  hidden: [1, 2]\n").find("model.hidden must be a single value"), std::string::npos);
  EXPECT_NE(error_of("parallel:\n  ulysses: 3\n").find("model.heads (8) is not divisible by the Ulysses degree parallel.ulysses (3)"),
            std::string::npos);
  EXPECT_NE(error_of("model:\n  heads: 8\n  kv_heads: 2\nparallel:\n  ulysses: 16\n")
                .find("model.heads (8) is not divisible by the Ulysses degree parallel.ulysses (16)"),
            std::string::npos);
  EXPECT_EQ(error_of("model:\n  heads: 8\n  kv_heads: 2\nparallel:\n  ulysses: 8\n"), "") << "kv heads replicated";
  EXPECT_EQ(error_of("parallel:\n  ulysses: auto\n  ulysses_head_chunks: 4\n"), "") << "both resolved with the world";
  EXPECT_NE(error_of("parallel:\n  ulysses: 0\n").find("parallel.ulysses = '0'"), std::string::npos);
  EXPECT_NE(error_of("parallel:\n  ulysses: 2\n  ulysses_head_chunks: 3\n").find("parallel.ulysses_head_chunks (3)"),
            std::string::npos);
  EXPECT_NE(error_of("model:\n  heads: 12\n  hidden: 96\n  kv_heads: 4\nparallel:\n  ulysses: 6\n")
                .find("model.kv_heads (4) and parallel.ulysses (6)"),
            std::string::npos);
  EXPECT_NE(error_of("run:\n  seq_len: 7\nparallel:\n  ring: 4\n").find("run.seq_len (7) must be at least 8"),
            std::string::npos);
  EXPECT_NE(error_of("parallel:\n  ring_layout: striped\n").find("allowed values: zigzag|contiguous"), std::string::npos);
  EXPECT_NE(error_of("mst:\n  mlp_chunks: 0\n").find("mst.mlp_chunks = '0': expected an integer in [1, 1073741824] or 'auto'"),
            std::string::npos);
  EXPECT_NE(error_of("mst:\n  lm_head_chunks: many\n").find("or 'auto'"), std::string::npos);
  EXPECT_NE(error_of("mst:\n  chunk_budget_mib: 0\n").find("mst.chunk_budget_mib = '0': must be in (0, "),
            std::string::npos);
  EXPECT_NE(error_of("- a\n- b\n").find("must be a map of sections"), std::string::npos);
  EXPECT_NE(error_of("run:\n  seed: 1234\n", {"run.nope=1"}).find("unknown key 'run.nope'"), std::string::npos);
  EXPECT_NE(error_of("run:\n  seed: 1234\n", {"run.steps"}).find("expected section.key=value"), std::string::npos);
}

// What the robustness probe found: sizes past 32 bits, blanks, signs, duplicates,
// several documents, empty decks, complex keys, sizes beyond any machine, outputs
// that would overwrite the deck or each other.
TEST(Deck, ImpossibleAndAmbiguousInputIsRefused) {
  const auto refused = [](const std::string& text, const std::string& message,
                          const std::vector<std::string>& overrides = {}) {
    const auto e = error_of(text, overrides);
    EXPECT_NE(e.find(message), std::string::npos) << "deck:\n" << text << "error: '" << e << "'";
  };
  refused("model:\n  hidden: 4294967336\n", "model.hidden = '4294967336': must be in [1, 1048576]");
  refused("run:\n  grad_accum: 2147483648\n", "run.grad_accum = '2147483648': must be in [1, 4096]");
  refused("model:\n  heads: 4294967296\n", "must be in [1, 65536]");
  refused("model:\n  vocab: 4294967296\n", "must be in [2, 134217728]");
  refused("parallel:\n  ring: 99999999999999999999\n", "parallel.ring = '99999999999999999999': expected an integer");
  refused("run:\n  seed: 1234\n", "model.hidden = ' 40': expected an integer", {"model.hidden= 40"});
  refused("run:\n  seed: 1234\n", "model.hidden = '40 ': expected an integer", {"model.hidden=40 "});
  refused("run:\n  seed: 1234\n", "model.hidden = '+40': expected an integer", {"model.hidden=+40"});
  refused("mst:\n  chunk_budget_mib: 2e302\n", "mst.chunk_budget_mib = '2e302': must be in (0, ");
  refused("model:\n  hidden: 40\n  hidden: 48\n", "model.hidden is given twice");
  refused("model:\n  hidden: 40\nmodel:\n  layers: 2\n", "section 'model' appears twice");
  refused("model:\n  hidden: 40\n---\nrun:\n  steps: 3\n", "holds 2 YAML documents");
  refused("", "is empty");
  refused("~\n", "is empty");
  refused("? [model, run]\n: 1\n", "a section name must be a plain word");
  refused("model:\n  ? [hidden]\n  : 40\n", "a key of section 'model' must be a plain word");
  refused(",model:\n  hidden: 40\n", "line 1 starts with ','");
  refused("model:\n  hidden: 1048576\n  intermediate: 4194304\n  layers: 16384\n  heads: 8\n  kv_heads: 8\n",
          "exceed what any machine holds");
  refused("run:\n  seq_len: 1099511627776\n  grad_accum: 4096\nmodel:\n  vocab: 134217728\n",
          "exceeds what any machine holds");
  refused("output:\n  metrics: same.h5\n  dump: ./same.h5\n", "output.dump and output.metrics name the same file");
  const auto deck = write_deck("run:\n  seed: 1234\n");
  for (const char* key : {"output.metrics=", "output.dump="}) {
    try {
      load_deck(deck, {key + deck});
      FAIL() << key << " the deck itself was accepted";
    } catch (const DeckError& e) {
      EXPECT_NE(std::string(e.what()).find("is the deck itself"), std::string::npos) << e.what();
    }
  }
  try {
    load_deck(std::filesystem::temp_directory_path().string(), {});
    FAIL() << "a directory was taken as a deck";
  } catch (const DeckError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory, not a deck file"), std::string::npos) << e.what();
  }
}

TEST(Deck, RunControlKeys) {
  const auto d = load_deck(write_deck("run:\n  time_limit_s: 90\n  watchdog_s: 30\noutput:\n  flush_every: 5\n"), {});
  EXPECT_EQ(d.run.time_limit_s, 90);
  EXPECT_EQ(d.run.watchdog_s, 30);
  EXPECT_EQ(d.output.flush_every, 5);
  const auto defaults = load_deck(write_deck("run:\n  seed: 1234\n"), {});
  EXPECT_EQ(defaults.run.time_limit_s, 0) << "no budget unless asked";
  EXPECT_EQ(defaults.run.watchdog_s, 0) << "auto";
  EXPECT_EQ(defaults.output.flush_every, 0);
  EXPECT_NE(error_of("run:\n  watchdog_s: 0\n").find("run.watchdog_s = '0': must be in (0, "), std::string::npos);
}

TEST(Deck, MissingFileIsAnError) {
  try {
    load_deck("/nonexistent/deck.yaml", {});
    FAIL() << "no error";
  } catch (const DeckError& e) {
    EXPECT_NE(std::string(e.what()).find("'/nonexistent/deck.yaml' not found"), std::string::npos);
  }
}

TEST(Deck, KeyReferenceListsEveryKey) {
  const auto ref = deck_key_reference();
  for (const char* k : {"model.hidden", "model.kv_heads", "run.seq_len", "run.grad_accum", "memory.policy",
                        "output.metrics", "output.dump"})
    EXPECT_NE(ref.find(k), std::string::npos) << k;
}

TEST(Deck, NumbersAreDecimalAndFinite) {
  const std::string plain = "run:\n  seq_len: 40\n";
  EXPECT_NE(error_of(plain, {"parallel.zero=-0"}).find("parallel.zero = '-0': expected an integer"), std::string::npos);
  EXPECT_NE(error_of(plain, {"run.learning_rate=0x1p-3"}).find("run.learning_rate"), std::string::npos);
  EXPECT_NE(error_of(plain, {"reference.losses=1 0x2"}).find("reference.losses"), std::string::npos);
  EXPECT_NE(error_of(plain, {"run.init_std=1e-400"}).find("run.init_std"), std::string::npos) << "rounds to 0";
  // A subnormal is a finite number: accepted as written.
  EXPECT_EQ(load_deck(write_deck(plain), {"run.norm_init_noise=4.9e-324"}).run.norm_init_noise, 4.9e-324);
  EXPECT_EQ(load_deck(write_deck(plain), {"parallel.zero=0"}).parallel.zero, 0);
}

TEST(Deck, DocumentsAndWindowMakeTheMask) {
  const auto d = load_deck(write_deck("run:\n  seq_len: 40\n  documents: \"7 3\"\nmodel:\n  sliding_window: 5\n"), {});
  EXPECT_EQ(d.options.mask.doc_starts, (std::vector<std::int64_t>{7, 10, 17, 20, 27, 30, 37}));
  EXPECT_EQ(d.options.mask.window, 5);
  const std::string plain = "run:\n  seq_len: 40\n";
  EXPECT_TRUE(load_deck(write_deck(plain), {}).options.mask.causal_only()) << "the default: one document, no window";
  EXPECT_NE(error_of(plain, {"run.documents=lognormal:3"}).find("run.documents"), std::string::npos);
  EXPECT_NE(error_of(plain, {"run.documents=4 0"}).find("run.documents"), std::string::npos);
  EXPECT_NE(error_of(plain, {"model.sliding_window=-1"}).find("model.sliding_window"), std::string::npos);
  // Unset, the new keys leave every existing digest as it was: set to their defaults, too.
  const std::string base = "model:\n  hidden: 64\n  heads: 4\n  kv_heads: 2\nrun:\n  seq_len: 40\n";
  EXPECT_EQ(load_deck(write_deck(base), {"run.documents=", "model.sliding_window=0"}).problem_digest,
            load_deck(write_deck(base), {}).problem_digest);
}

// model.sliding_window_layers: all (the default), every:N[:OFFSET] (l % N == OFFSET) or a list;
// refused with the key named when malformed, outside the model, empty or without a window.
TEST(Deck, SlidingWindowLayers) {
  const std::string base = "model:\n  layers: 6\n  sliding_window: 4\nrun:\n  seq_len: 40\n";
  const auto windowed = [&](const std::string& pattern) {
    const auto d = load_deck(write_deck(base), {"model.sliding_window_layers=" + pattern});
    std::vector<int> out;
    for (int l = 0; l < d.model.layers; ++l)
      if (d.options.mask.windowed(l)) out.push_back(l);
    return out;
  };
  using Layers = std::vector<int>;
  EXPECT_EQ(windowed("all"), (Layers{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(windowed("every:2"), (Layers{0, 2, 4})) << "Gemma 2's alternation: layer 0 windowed";
  EXPECT_EQ(windowed("every:2:1"), (Layers{1, 3, 5}));
  EXPECT_EQ(windowed("every:4:3"), (Layers{3}));
  EXPECT_EQ(windowed("every:1"), (Layers{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(windowed("5 0 2"), (Layers{0, 2, 5})) << "any order";
  EXPECT_EQ(windowed("1,4"), (Layers{1, 4}));
  EXPECT_EQ(windowed("3"), (Layers{3}));
  // The default: every layer (and no window at all without model.sliding_window).
  EXPECT_TRUE(load_deck(write_deck(base), {}).options.mask.window_layers.is_all());
  EXPECT_FALSE(load_deck(write_deck(base), {"model.sliding_window=0"}).options.mask.windowed(0));
  const auto error = [&](const std::string& pattern, const std::vector<std::string>& more = {}) {
    auto sets = more;
    sets.push_back("model.sliding_window_layers=" + pattern);
    return error_of(base, sets);
  };
  const std::string key = "model.sliding_window_layers = '";
  for (const char* bad : {"", "every", "every:", "every:0", "every:2:2", "every:2:-1", "every:2:1:0", "every:x",
                          "every:2:", "some", "0 x", "-1", "1.5", "2 2", "all 1"})
    EXPECT_NE(error(bad).find(key + bad + "'"), std::string::npos) << "'" << bad << "': " << error(bad);
  EXPECT_NE(error("0 6").find("layer 6 is out of range (model.layers = 6"), std::string::npos) << error("0 6");
  EXPECT_NE(error("every:8:7").find("selects none of the model's 6 layers"), std::string::npos);
  EXPECT_NE(error("every:2", {"model.sliding_window=0"}).find("needs model.sliding_window > 0"), std::string::npos);
  EXPECT_NE(error("0 1 2 3 4 5", {"model.sliding_window=0"}).find("needs model.sliding_window > 0"),
            std::string::npos)
      << "a pattern set without a window";
  EXPECT_EQ(error("all", {"model.sliding_window=0"}), "") << "the default, written out";
  // `minilst keys` lists it, its default and its forms.
  const auto ref = deck_key_reference();
  EXPECT_NE(ref.find("model.sliding_window_layers"), std::string::npos);
  EXPECT_NE(ref.find("every:N[:OFFSET]"), std::string::npos);
}

// The digest names the problem: the set of windowed layers, however written; unchanged unset.
TEST(Deck, SlidingWindowLayersDigestIsTheLayerSet) {
  const std::string base = "model:\n  layers: 4\n  sliding_window: 4\nrun:\n  seq_len: 40\n";
  const auto digest = [&](const std::string& pattern) {
    return load_deck(write_deck(base), {"model.sliding_window_layers=" + pattern}).problem_digest;
  };
  const std::string unset = load_deck(write_deck(base), {}).problem_digest;
  EXPECT_EQ(digest("all"), unset);
  EXPECT_EQ(digest("every:1"), unset);
  EXPECT_EQ(digest("3 2 1 0"), unset) << "every layer listed: the same problem";
  EXPECT_NE(digest("every:2"), unset);
  EXPECT_EQ(digest("every:2"), digest("0 2"));
  EXPECT_EQ(digest("every:2:1"), digest("3, 1"));
  EXPECT_NE(digest("every:2"), digest("every:2:1"));
  EXPECT_NE(digest("0"), digest("0 2"));
  // Without a window the default pattern leaves the digest as before the key existed.
  const std::string plain = "model:\n  layers: 4\nrun:\n  seq_len: 40\n";
  EXPECT_EQ(load_deck(write_deck(plain), {"model.sliding_window_layers=all"}).problem_digest,
            load_deck(write_deck(plain), {}).problem_digest);
}

TEST(Deck, ProblemDigestCoversTheProblemKeysOnly) {
  const std::string base = "model:\n  hidden: 64\n  heads: 4\n  kv_heads: 2\nrun:\n  seq_len: 40\n  learning_rate: 3e-4\n";
  const auto digest = [&](const std::vector<std::string>& sets) { return load_deck(write_deck(base), sets).problem_digest; };
  const std::string d0 = digest({});
  EXPECT_EQ(d0.size(), 16u);
  // What may be tuned leaves the problem as it is; the same value written another way too.
  EXPECT_EQ(digest({"run.steps=7", "run.warmup_steps=2", "memory.policy=checkpoint", "run.precision=double",
                    "parallel.ulysses=2", "output.metrics=x.h5", "reference.rtol=1e-3"}), d0);
  EXPECT_EQ(digest({"run.learning_rate=0.0003", "model.hidden=064"}), d0);
  EXPECT_EQ(digest({"run.norm_init_noise=-0"}), digest({"run.norm_init_noise=0"}));
  // Every key that defines the problem changes it.
  for (const char* set : {"model.hidden=128", "model.layers=3", "model.heads=8", "model.kv_heads=4",
                          "model.intermediate=100", "model.norm_eps=1e-6", "model.vocab=999", "model.rope_theta=500000",
                          "run.seq_len=41", "run.grad_accum=2", "run.seed=7", "run.learning_rate=1e-3",
                          "run.weight_decay=0", "run.init_std=0.01", "run.norm_init_noise=0.5",
                          "run.documents=7 3", "model.sliding_window=5"})
    EXPECT_NE(digest({set}), d0) << set;
  // reference.problem: matched, or not given (not checked), or another problem's.
  EXPECT_TRUE(load_deck(write_deck(base), {"reference.problem=" + d0}).problem_matches_reference());
  EXPECT_TRUE(load_deck(write_deck(base), {}).problem_matches_reference());
  EXPECT_FALSE(load_deck(write_deck(base), {"reference.problem=" + d0, "model.layers=3"}).problem_matches_reference());
}
