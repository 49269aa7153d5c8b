#include "io/deck.hpp"

#include "io/input_file.hpp"
#include "core/number_text.hpp"

#include "core/fnv1a.hpp"
#include "core/kernel_choice.hpp"
#include "io/output_names.hpp"  // json_summary_path: the summary beside the metrics file
#include "model/documents.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>

namespace minilst {

namespace {

enum class Kind { Int, Float, Choice, Path, Text, ChunkCount, Numbers };  // ChunkCount: integer >= 1 or "auto"; Numbers: a list

// Typed value of one key, validated against its row.
struct Value {
  std::string text;
  long long i = 0;
  double f = 0;
  std::vector<double> list;  // Numbers
};
using Setter = std::function<void(Deck&, const Value&)>;  // where the value goes

// One row per key: name, default, rule, meaning, and where its value goes.
struct KeySpec {
  std::string section, key, default_value;
  Kind kind;
  double min = 0, max = HUGE_VAL;    // Int/Float/ChunkCount: inclusive bounds (a min of 1e-300 stands for "> 0")
  std::vector<std::string> choices;  // Choice
  std::string help;
  bool or_auto = false;              // Float: `auto` is a value too
  Setter set;
  std::string name() const { return section + "." + key; }
};

KeySpec row(const std::string& name, std::string default_value, Kind kind, double min, double max,
            std::vector<std::string> choices, std::string help, Setter set, bool or_auto = false) {
  const auto dot = name.find('.');
  return {name.substr(0, dot), name.substr(dot + 1), std::move(default_value), kind, min, max, std::move(choices),
          std::move(help), or_auto, std::move(set)};
}
// An integer key setting field(deck).
template <class Field>
KeySpec integer(const std::string& name, long long def, double min, double max, std::string help, Field field) {
  return row(name, std::to_string(def), Kind::Int, min, max, {}, std::move(help), [field](Deck& d, const Value& x) {
    auto& f = field(d);
    f = std::remove_reference_t<decltype(f)>(x.i);
  });
}
// A number key setting field(deck).
template <class Field>
KeySpec number(const std::string& name, std::string def, double min, double max, std::string help, Field field) {
  return row(name, std::move(def), Kind::Float, min, max, {}, std::move(help),
             [field](Deck& d, const Value& x) { field(d) = x.f; });
}
// A choice among the names of enum E (core/names.hpp), setting field(deck).
template <class E, class Field>
KeySpec choice(const std::string& name, E def, std::string help, Field field) {
  return row(name, name_of(def), Kind::Choice, 0, 0, names_of<E>(), std::move(help),
             [field](Deck& d, const Value& x) { parse_name(x.text, field(d)); });
}
// A choice among some of E's names (`allowed`, in that order).
template <class E, class Field>
KeySpec choice_of(const std::string& name, E def, const std::vector<E>& allowed, std::string help, Field field) {
  std::vector<std::string> names;
  for (const E e : allowed) names.push_back(name_of(e));
  return row(name, name_of(def), Kind::Choice, 0, 0, std::move(names), std::move(help),
             [field](Deck& d, const Value& x) { parse_name(x.text, field(d)); });
}
// A yes/no choice: `yes` sets field(deck) true.
template <class Field>
KeySpec flag(const std::string& name, const std::string& yes, const std::string& no, bool def, std::string help,
             Field field) {
  return row(name, def ? yes : no, Kind::Choice, 0, 0, {yes, no}, std::move(help),
             [field, yes](Deck& d, const Value& x) { field(d) = x.text == yes; });
}
KeySpec chunk_count(const std::string& name, std::string help, ChunkSetting MstConfig::*field) {
  return row(name, "auto", Kind::ChunkCount, 1, 1 << 30, {}, std::move(help), [field](Deck& d, const Value& x) {
    d.mst.*field = {x.text == "auto", x.text == "auto" ? 0 : int(x.i)};
  });
}

// The table of deck keys, a function per section, in the order `minilst keys` and the resolved deck list them.
std::vector<KeySpec> model_keys() {
  return {
    integer("model.hidden", 256, 1, 1 << 20, "hidden size d; divisible by model.heads",
            [](Deck& d) -> auto& { return d.model.hidden; }),
    integer("model.layers", 4, 1, 1 << 14, "decoder layers L", [](Deck& d) -> auto& { return d.model.layers; }),
    integer("model.heads", 8, 1, 1 << 16, "query heads H; head dim h = hidden/heads must be even (RoPE)",
            [](Deck& d) -> auto& { return d.model.heads; }),
    integer("model.kv_heads", 4, 1, 1 << 16, "key/value heads G; divides model.heads (G=H: MHA, G=1: MQA)",
            [](Deck& d) -> auto& { return d.model.kv_heads; }),
    integer("model.intermediate", 688, 1, 1 << 22, "MLP intermediate size I",
            [](Deck& d) -> auto& { return d.model.intermediate; }),
    integer("model.vocab", 4096, 2, 1 << 27, "vocabulary size V", [](Deck& d) -> auto& { return d.model.vocab; }),
    integer("model.sliding_window", 0, 0, 9.007199254740992e15,
            "sliding-window attention: a query sees at most this many keys, itself included, within its document "
            "(0 = none)",
            [](Deck& d) -> auto& { return d.model.sliding_window; }),
    row("model.sliding_window_layers", "all", Kind::Text, 0, 0, {},
        "the layers model.sliding_window applies to (the others see their whole document): all, every:N[:OFFSET] "
        "(the layers l with l % N = OFFSET: every:2 = 0, 2, 4, ..., Gemma 2's alternation) or layer numbers "
        "(\"0 2 5\"); needs model.sliding_window > 0 unless all",
        [](Deck& d, const Value& x) {
          try {
            d.model.sliding_window_layers = window_layers(x.text);
          } catch (const std::invalid_argument& e) {
            throw DeckError(std::string("deck: model.sliding_window_layers = ") + e.what());
          }
        }),
    number("model.rope_theta", "10000", 1e-300, HUGE_VAL, "RoPE base theta (> 0)",
           [](Deck& d) -> auto& { return d.model.rope_theta; }),
    number("model.norm_eps", "1e-5", 0, 0.1,
           "RMSNorm epsilon, added to the mean square of activations of order 1 (larger values undo the norm)",
           [](Deck& d) -> auto& { return d.model.norm_eps; }),
  };
}

std::vector<KeySpec> run_keys() {
  return {
    integer("run.seq_len", 512, 2, double(1LL << 40), "sequence length S (tokens per micro-step)",
            [](Deck& d) -> auto& { return d.run.seq_len; }),
    integer("run.steps", 10, 1, 1e9, "training steps", [](Deck& d) -> auto& { return d.run.steps; }),
    integer("run.warmup_steps", 1, 0, 1e9, "first steps left out of the timing statistics; < run.steps",
            [](Deck& d) -> auto& { return d.run.warmup_steps; }),
    integer("run.grad_accum", 1, 1, 4096, "micro-steps per optimizer step",
            [](Deck& d) -> auto& { return d.run.grad_accum; }),
    choice("run.precision", Precision::float32,
           "scalar type: bf16 is mixed precision (bf16 activations and weight copy, fp32 gradients, master weights, "
           "AdamW moments and accumulations; docs/techniques.md)",
           [](Deck& d) -> auto& { return d.run.precision; }),
    choice("run.kernels", KernelVariant::optimized,
           "kernel implementations: the optimised ones, or the plain reference loops beside them (slow; for checking)",
           [](Deck& d) -> auto& { return d.options.kernels.variant; }),
    choice("run.attention_kernel", AttentionKernel::automatic,
           "optimised attention: tensor_core (CUDA builds: bf16 operands, tf32 for fp32 runs), onednn (bf16 on hosts "
           "with oneDNN: the flash tiles on the CPU's matrix unit, AMX where it has one), portable (the Kokkos kernel, "
           "every backend) or auto (tensor cores for bf16 on CUDA builds, onednn for bf16 on CPUs with AMX, portable "
           "otherwise)",
           [](Deck& d) -> auto& { return d.options.kernels.attention; }),
    choice_of("run.gemm_bf16", GemmPath::automatic,
              {GemmPath::automatic, GemmPath::onednn, GemmPath::avx512_bf16, GemmPath::fp32_tiles, GemmPath::cublas},
              "products with bf16 operands (fp32 accumulation): onednn (hosts with oneDNN: AMX or AVX512_BF16), "
              "avx512_bf16 (x86 CPUs with AVX512_BF16), fp32_tiles (converted to fp32, then run.gemm_fp32's path), "
              "cublas (CUDA builds) or auto (cuBLAS on CUDA; on CPUs the fastest of those every rank can run, "
              "measured at start)",
              [](Deck& d) -> auto& { return d.options.kernels.gemm_bf16; }),
    choice_of("run.gemm_fp32", GemmPath::automatic, {GemmPath::automatic, GemmPath::blas, GemmPath::onednn},
              "fp32 products (and bf16's fp32 tiles): blas (the BLAS behind Kokkos Kernels), onednn (hosts with "
              "oneDNN) or auto (the BLAS on CUDA builds and in double runs; on CPUs the faster of the two, measured "
              "at start)",
              [](Deck& d) -> auto& { return d.options.kernels.gemm_fp32; }),
    integer("run.seed", 1234, 0, 9.007199254740992e15, "seed of the parameters and the synthetic data",
            [](Deck& d) -> auto& { return d.run.seed; }),
    row("run.documents", "", Kind::Text, 0, 0, {},
        "packed documents in each sequence: lengths repeated until run.seq_len (\"61 3 1 17\"), fixed:N, "
        "uniform:A:B or lognormal:MEAN:SIGMA (drawn with run.seed); positions restart and attention stays within "
        "a document, a document's last token predicts nothing; \"\" = one document",
        [](Deck& d, const Value& x) { d.run.documents = x.text; }),
    number("run.learning_rate", "3e-4", 0, HUGE_VAL, "AdamW learning rate (>= 0)",
           [](Deck& d) -> auto& { return d.run.learning_rate; }),
    number("run.weight_decay", "0.1", 0, HUGE_VAL, "AdamW decoupled weight decay (>= 0)",
           [](Deck& d) -> auto& { return d.run.weight_decay; }),
    number("run.init_std", "0.02", 0, HUGE_VAL, "std of the normal init of weight matrices",
           [](Deck& d) -> auto& { return d.run.init_std; }),
    number("run.init_std_qk", "0", 0, HUGE_VAL,
           "std of the normal init of Wq and Wk (0: run.init_std); minilst verify sets sqrt(3 / model.hidden) where it "
           "is 0, so that attention scores are peaked (std about 3) and the ring's online softmax rescales",
           [](Deck& d) -> auto& { return d.run.init_std_qk; }),
    number("run.norm_init_noise", "0", 0, HUGE_VAL, "norm weights start at 1 + normal(0, this) (0: ones)",
           [](Deck& d) -> auto& { return d.run.norm_init_noise; }),
    number("run.time_limit_s", "0", 0, 1e9,
           "stop cleanly (metrics written, complete = false) before one more step would pass this many seconds; 0 = none",
           [](Deck& d) -> auto& { return d.run.time_limit_s; }),
    row("run.watchdog_s", "auto", Kind::Float, 1e-300, 1e9, {},
        "end the rank (exit 1, rank 0 writing the finished steps) when no step finishes for this many seconds "
        "(a stopped or dead peer); auto = max(60, the first step's FLOPs at 0.5 GFLOP/s), then max(60, 10 x the "
        "slowest step); none on one rank; the set-up and the final write wait max(600, 10 x this)",
        [](Deck& d, const Value& x) { d.run.watchdog_s = x.text == "auto" ? 0.0 : x.f; }, true),
    row("run.tier", "baseline", Kind::Choice, 0, 0, {"baseline", "ported", "optimized"},
        "the procurement tier the run claims (RUN_RULES.md): baseline (shipped deck and build), ported (build and "
        "launcher changed), optimized (documented source changes); the RESULT line's tier= says whether it holds",
        [](Deck& d, const Value& x) { d.run.tier = x.text; }),
    row("run.machine", "", Kind::Path, 0, 0, {},
        "a machine file (machines/*.yaml, `minilst probe`; `minilst run --machine` wins): the run predicts each "
        "phase's time on it at start (docs/time_model.md), records the prediction beside the measured times and "
        "prints their ratio; a file that cannot be read or priced stops the run before the first step; \"probe\" = "
        "measure this job's ranks first (as `minilst probe` at the deck's head dim, about 20 s; the file is kept in "
        "the metrics); \"\" = none",
        [](Deck& d, const Value& x) { d.run.machine = x.text; }),
  };
}

std::vector<KeySpec> parallel_keys() {
  return {
    row("parallel.ulysses", "1", Kind::ChunkCount, 1, 1 << 16, {},
        "Ulysses degree U: divides model.heads; kv heads a multiple or divisor; or auto (the largest U that "
        "divides the ranks the ring leaves and that the heads allow: Ulysses over every rank, data parallel "
        "only where the heads stop it; resolved at start with the world size, `plan` with --ranks)",
        [](Deck& d, const Value& x) { d.parallel.ulysses = x.text == "auto" ? 0 : int(x.i); }),
    row("parallel.ulysses_head_chunks", "1", Kind::ChunkCount, 1, 1 << 16, {},
        "Ulysses over chunks of heads: attention and its all-to-alls run for one chunk of each member's heads at a "
        "time, the next chunk's exchange overlapping (its buffers a chunk's, not every head's); N divides the "
        "query heads per member and their kv heads (unless one), or auto (the largest such N up to 4, with a "
        "ring one that splits the kv heads; 1 without Ulysses)",
        [](Deck& d, const Value& x) { d.parallel.ulysses_head_chunks = x.text == "auto" ? 0 : int(x.i); }),
    integer("parallel.ring", 1, 1, 1 << 20, "ring degree R; world = D x T x U x R (D data parallel)",
            [](Deck& d) -> auto& { return d.parallel.ring; }),
    integer("parallel.tensor", 1, 1, 1 << 10,
            "tensor-parallel degree T (Megatron style, with sequence parallelism): q, k, v, gate, up split by "
            "columns, o and down by rows, the embedding and LM head by vocabulary; the innermost ranks (one node)",
            [](Deck& d) -> auto& { return d.parallel.tensor; }),
    choice("parallel.ring_layout", RingLayout::zigzag,
           "tokens of ring members: zigzag (chunks r and 2R-1-r: causal balance), contiguous, or balanced "
           "(chunks dealt by their attention cost under run.documents and model.sliding_window)",
           [](Deck& d) -> auto& { return d.parallel.layout; }),
    choice("parallel.ring_variant", RingVariant::flash, "ring attention algorithm",
           [](Deck& d) -> auto& { return d.parallel.variant; }),
    choice("parallel.rsa_backward", RsaBackward::seed,
           "RSA's backward, read with ring_variant rsa (ignored otherwise): seed (the seed paper's: keeps the "
           "softmax probabilities, all-reduces dK, dV partials) or flash (the flash ring's, from log-sum-exp rows)",
           [](Deck& d) -> auto& { return d.parallel.rsa_backward; }),
    flag("parallel.ring_overlap", "true", "false", true,
         "overlap ring transfers with compute (where the backend can: the metrics record what ran)",
         [](Deck& d) -> auto& { return d.parallel.overlap; }),
    integer("parallel.zero", 0, 0, 3,
            "ZeRO stage over all ranks: 0 replicated, 1 optimizer states sharded, 2 + gradients, 3 + weights "
            "(gathered per layer); on one rank only 0, or 2 with memory.optimizer_offload",
            [](Deck& d) -> auto& { return d.parallel.zero; }),
  };
}

std::vector<KeySpec> mst_keys() {
  return {
    chunk_count("mst.mlp_chunks", "MLP mini-sequences M (1 = unchunked) or auto", &MstConfig::mlp),
    chunk_count("mst.lm_head_chunks", "LM head + loss mini-sequences (1 = unchunked) or auto", &MstConfig::lm_head),
    number("mst.chunk_budget_mib", "256", 1e-300, double(1LL << 40),
           "auto: smallest M whose chunk intermediates fit this many MiB (> 0)",
           [](Deck& d) -> auto& { return d.mst.budget_mib; }),
  };
}

std::vector<KeySpec> memory_keys() {
  return {
    choice("memory.policy", MemoryPolicy::full,
           "activations kept for backward (offload kinds: in host memory; vanilla, hf_checkpoint: the papers' "
           "baselines, no chunks)",
           [](Deck& d) -> auto& { return d.options.policy; }),
    row("memory.offload_alpha", "auto", Kind::Float, 0, 1.0, {},
        "offload: token fraction of q, k, v, y and the MLP's tensors in host memory, the rest recomputed "
        "(1: nothing recomputed); auto = fit the copy into a layer's compute",
        [](Deck& d, const Value& x) {
          d.memory.alpha_auto = x.text == "auto";
          d.options.offload.alpha = d.memory.alpha_auto ? 1.0 : x.f;  // auto starts at 1 (bounded by the budget)
        },
        true),
    choice("memory.offload_alpha_values", AlphaValues::continuous,
           "offload_alpha auto chooses among: continuous = any multiple of 1/S; memo = MEMO's 0, 1/8, 1/4, 1/2, 1 "
           "(the largest whose copy fits a layer's compute and the host budget)",
           [](Deck& d) -> auto& { return d.memory.alpha_values; }),
    number("memory.offload_bandwidth_gbs", "0", 0, 1e9,
           "host copy engine: modelled host link in GB/s (0 = unthrottled; host builds only)",
           [](Deck& d) -> auto& { return d.options.offload.bandwidth_gbs; }),
    row("memory.host_budget_mib", "auto", Kind::Float, 1e-300, double(1LL << 40), {},
        "host memory for offloaded activations per rank (> 0); auto = 3/4 of the node's memory / its ranks",
        [](Deck& d, const Value& x) {
          d.memory.host_budget_auto = x.text == "auto";
          d.memory.host_budget_mib = d.memory.host_budget_auto ? 0.0 : x.f;
        },
        true),
    flag("memory.optimizer_offload", "true", "false", false,
         "AdamW states, master weights and the gradient shard in host memory, the update on host threads "
         "(ZeRO-Offload); with any parallel.zero the layout allows",
         [](Deck& d) -> auto& { return d.memory.optimizer_offload; }),
    flag("memory.planner", "plan", "none", true,
         "plan: the warm-up step is recorded and planned, later steps run in one arena; none: a buffer per request",
         [](Deck& d) -> auto& { return d.memory.plan; }),
    choice("memory.planner_solver", PlanSolver::greedy,
           "memory plan solver: greedy best-fit, or exact (MIP, GLPK) on small traces",
           [](Deck& d) -> auto& { return d.memory.solver; }),
  };
}

std::vector<KeySpec> output_keys() {
  return {
    row("output.metrics", "auto", Kind::Path, 0, 0, {},
        "HDF5 metrics file (a JSON summary beside it: .h5 -> .json); auto = <deck>_<layout>_<ranks>r_<UTC>_<job or "
        "local>[_<array task>]_<pid>.h5 (layout: single, u<U>, r<R>, u<U>xr<R>, _dp<D>)",
        [](Deck& d, const Value& x) { d.output.metrics = x.text; }),
    row("output.dump", "", Kind::Path, 0, 0, {}, "HDF5 tensor dump of step 1 (params, grads, loss); empty = none",
        [](Deck& d, const Value& x) { d.output.dump = x.text; }),
    flag("output.overwrite", "true", "false", false,
         "replace an existing output file that is not a miniLST file of the same kind (never a link or device, "
         "another user's file in a sticky directory, an immutable file, or a file put there during the run)",
         [](Deck& d) -> auto& { return d.output.overwrite; }),
    integer("output.flush_every", 0, 0, 1e9,
            "also write the metrics file (complete = false) every this many steps, atomically; 0 = not by steps",
            [](Deck& d) -> auto& { return d.output.flush_every; }),
    number("output.flush_seconds", "600", 0, 1e9,
           "also write the metrics file (complete = false) after step 1 and then every this many seconds of run time "
           "(rank 0's clock, agreed at a step's end), atomically: at most this much is lost to a SIGKILL; 0 = not by "
           "time, nor after step 1",
           [](Deck& d) -> auto& { return d.output.flush_seconds; }),
  };
}

std::vector<KeySpec> reference_keys() {
  return {
    row("reference.losses", "", Kind::Numbers, 0, 0, {},
        "the expected loss of each step (numbers separated by blanks; \"\" = none): a run whose losses differ by "
        "more than reference.rtol is INVALID",
        [](Deck& d, const Value& x) { d.reference.losses = x.list; }),
    number("reference.rtol", "1e-4", 0, 1.0, "relative tolerance of the reference check (at least 5e-3 in bf16, its stated loss tolerance)",
           [](Deck& d) -> auto& { return d.reference.rtol; }),
    row("reference.problem", "", Kind::Text, 0, 0, {},
        "digest of the problem the losses were computed for (model.*, run.seq_len, grad_accum, seed, learning_rate, "
        "weight_decay, init_std, init_std_qk, norm_init_noise; scripts/reference_losses.sh prints it): a run whose problem differs "
        "is not reportable; \"\" = not checked",
        [](Deck& d, const Value& x) { d.reference.problem = x.text; }),
  };
}

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> keys = [] {
    std::vector<KeySpec> all;
    for (auto section : {model_keys(), run_keys(), parallel_keys(), mst_keys(), memory_keys(), output_keys(),
                         reference_keys()})
      for (auto& k : section) all.push_back(std::move(k));
    return all;
  }();
  return keys;
}

const KeySpec* find_key(const std::string& section, const std::string& key) {
  for (const auto& k : schema())
    if (k.section == section && k.key == key) return &k;
  return nullptr;
}

std::string known_keys(const std::string& section) {
  std::string out;
  for (const auto& k : schema())
    if (k.section == section) out += (out.empty() ? "" : ", ") + k.key;
  return out;
}

[[noreturn]] void unknown_key(const std::string& section, const std::string& key) {
  bool section_known = false;
  for (const auto& k : schema()) section_known |= k.section == section;
  if (!section_known)
    throw DeckError("deck: unknown section '" + section + "' (sections: model, run, parallel, mst, memory, output, reference)");
  throw DeckError("deck: unknown key '" + section + "." + key + "' (keys of '" + section +
                  "': " + known_keys(section) + ")");
}

// Shortest text that reads back as x, in a form YAML 1.1 readers (PyYAML) take
// for a float: a '.' in the mantissa, a signed exponent ("3.0e-04", "10000.0").
std::string yaml_float(double x) {
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string t = buf;
  const auto e = t.find('e');
  std::string mantissa = t.substr(0, e), exponent = e == std::string::npos ? "" : t.substr(e);
  if (mantissa.find('.') == std::string::npos) mantissa += ".0";
  return mantissa + exponent;
}

std::string integer_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", x);
  return buf;
}

Value convert(const KeySpec& spec, const std::string& text) {
  Value v{text};
  const std::string where = "deck: " + spec.name() + " = '" + text + "': ";
  switch (spec.kind) {
    case Kind::Int:
      if (!parse_integer(text, v.i)) throw DeckError(where + "expected an integer");
      // compared exactly: 2^53 + 1 is not 2^53 (long double holds every 64-bit integer)
      if ((long double)v.i < (long double)spec.min || (long double)v.i > (long double)spec.max)
        throw DeckError(where + "must be in [" + integer_text(spec.min) + ", " + integer_text(spec.max) + "]");
      break;
    case Kind::Float:
      if (spec.or_auto && text == "auto") break;
      if (!parse_decimal(text, v.f))
        throw DeckError(where + "expected a finite number" + (spec.or_auto ? " or 'auto'" : "") + " in decimals");
      v.f += 0.0;  // -0 is 0 (one text, one problem digest)
      v.text = yaml_float(v.f);
      if (v.f < spec.min || v.f > spec.max) {
        std::ostringstream msg;
        if (spec.min > 0 && spec.min <= 1e-300 && v.f > 0 && v.f < spec.min) {  // 1e-300 stands for "> 0"
          msg << where << "positive, but too small to compute with: must be at least 1e-300";
        } else if (spec.max == HUGE_VAL) {
          msg << where << "must be " << (spec.min > 0 ? "> 0" : ">= " + yaml_float(spec.min));
        } else if (spec.min > 0 && spec.min <= 1e-300) {
          msg << where << "must be in (0, " << spec.max << "]";
        } else {
          msg << where << "must be in [" << spec.min << ", " << spec.max << "]";
        }
        throw DeckError(msg.str());
      }
      break;
    case Kind::Choice: {
      bool ok = false;
      std::string list;
      for (const auto& c : spec.choices) {
        ok |= c == text;
        list += (list.empty() ? "" : "|") + c;
      }
      if (!ok) throw DeckError(where + "allowed values: " + list);
      break;
    }
    case Kind::ChunkCount:
      if (text == "auto") break;
      if (!parse_integer(text, v.i) || v.i < 1 || double(v.i) > spec.max)
        throw DeckError(where + "expected an integer in [1, " + integer_text(spec.max) + "] or 'auto'");
      break;
    case Kind::Path:
    case Kind::Text: break;
    case Kind::Numbers: {
      std::istringstream in(text);
      std::string word;
      while (in >> word) {
        double x = 0;
        if (!parse_decimal(word, x))
          throw DeckError(where + "expected finite numbers separated by blanks ('" + word + "' is not one)");
        v.list.push_back(x);
      }
      break;
    }
  }
  return v;
}

// The slowest host-link cap memory.offload_bandwidth_gbs accepts (GB/s).
constexpr double kMinOffloadBandwidthGBs = 1e-3;

void check(bool ok, const std::string& message) {
  if (!ok) throw DeckError("deck: " + message);
}

// Two names of one file: the same path once normalised, or (where both exist) one inode.
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto norm = [&](const std::string& p) { return fs::weakly_canonical(fs::absolute(p, ec).lexically_normal(), ec); };
  if (norm(a) == norm(b) && !ec) return true;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec) && !ec;
}

// Outputs never overwrite the deck or each other (what the file system allows is
// probed at start, where the output is created).
void check_output_paths(const Deck& d) {
  if (!d.run.machine.empty() && d.run.machine != kMachineProbeAtStart) {  // the machine file is read, never replaced
    std::vector<std::pair<const char*, std::string>> outputs = {{"output.dump", d.output.dump}};
    if (d.output.metrics != "auto") {
      outputs.push_back({"output.metrics", d.output.metrics});
      outputs.push_back({"output.metrics' JSON summary", json_summary_path(d.output.metrics)});
    }
    for (const auto& [key, file] : outputs)
      check(file.empty() || !same_file(file, d.run.machine),
            std::string(key) + " '" + file + "' is run.machine's machine file '" + d.run.machine + "'");
  }
  if (d.output.metrics != "auto") {
    const std::string summary = json_summary_path(d.output.metrics);
    check(!same_file(d.output.metrics, d.path), "output.metrics '" + d.output.metrics + "' is the deck itself");
    check(!same_file(summary, d.path), "output.metrics '" + d.output.metrics + "': its JSON summary '" + summary +
                                           "' would replace the deck itself");
    if (!d.output.dump.empty())
      check(!same_file(d.output.dump, summary) && !same_file(d.output.dump, summary + ".partial"),
            "output.dump '" + d.output.dump + "' is output.metrics' JSON summary '" + summary + "' (or its temporary name)");
  }
  if (!d.output.dump.empty()) {
    check(!same_file(d.output.dump, d.path), "output.dump '" + d.output.dump + "' is the deck itself");
    if (d.output.metrics != "auto") {  // each file is built under its name + ".partial": those collide too
      check(!same_file(d.output.dump, d.output.metrics),
            "output.dump and output.metrics name the same file '" + d.output.dump + "'");
      check(!same_file(d.output.dump, d.output.metrics + ".partial") &&
                !same_file(d.output.dump + ".partial", d.output.metrics),
            "output.dump '" + d.output.dump + "' and output.metrics '" + d.output.metrics +
                "': one is the other's temporary name (<name>.partial)");
    }
  }
}

// Every size the run derives from the keys stays far inside 64 bits: the largest
// tensors (S x V logits of the unchunked LM head, S x I of the MLP, the weights
// and their optimizer state) are bounded here, in floating point, before any
// integer product is formed. What does not fit the machine is refused later,
// against its memory, with the numbers.
void check_sizes(const Deck& d) {
  const auto& m = d.model;
  const double S = double(d.run.seq_len), V = m.vocab, I = m.intermediate, D = m.hidden;
  const double params = 2 * V * D + m.layers * (2 * D * D + 2 * D * D * m.kv_heads / m.heads + 3 * D * I + 2 * D) + D;
  const double widest = std::max({V, I, 4 * D});
  const double limit = std::ldexp(1.0, 56);  // 64 PiB, in bytes
  char msg[256];
  std::snprintf(msg, sizeof msg, "the model's %.3g parameters (%.3g bytes with gradients and AdamW moments in double) "
                "exceed what any machine holds", params, params * 32);
  check(params * 32 < limit, msg);
  std::snprintf(msg, sizeof msg, "run.seq_len x the widest row (%.0f x %.0f = %.3g elements, x run.grad_accum %d) "
                "exceeds what any machine holds", S, widest, S * widest, d.run.grad_accum);
  check(S * widest * 8 * d.run.grad_accum < limit, msg);
}

}  // namespace

namespace {

constexpr std::uintmax_t kMaxDeckBytes = 1 << 20;

// The deck file's text as one YAML map: refuses what is not a readable regular
// file, several documents, an empty deck, and anything but plain keys.
YAML::Node read_deck_file(const std::string& path) {
  std::string body, why;
  if (!try_read_input_file(path, kMaxDeckBytes, body, why)) {  // io/input_file.hpp: never blocks
    if (why == "not found") throw DeckError("deck: file '" + path + "' not found");
    if (why.rfind("a directory", 0) == 0) throw DeckError("deck: '" + path + "' is a directory, not a deck file");
    if (why.rfind("larger than", 0) == 0) throw DeckError("deck: '" + path + "' is " + why + ": not a deck");
    throw DeckError("deck: '" + path + "' cannot be read: " + why);
  }
  if (const auto deep = yaml_nesting_problem(body); !deep.empty())
    throw DeckError("deck: '" + path + "' is not a deck: " + deep);
  std::stringstream text(body);
  // yaml-cpp 0.7 never returns (its memory grows until the process dies) on a line
  // that starts with ',' (a flow indicator, never valid there in a block deck), also
  // after a document marker ("--- ," or "... ,").
  std::istringstream lines(text.str());
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && (line.compare(first, 3, "---") == 0 || line.compare(first, 3, "...") == 0))
      first = line.find_first_not_of(" \t", first + 3);
    if (first != std::string::npos && line[first] == ',')
      throw DeckError("deck: '" + path + "' is not valid YAML: line " + std::to_string(number) + " starts with ','");
  }
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text.str());
  } catch (const YAML::Exception& e) {
    throw DeckError("deck: '" + path + "' is not valid YAML: " + e.what());
  }
  if (docs.size() > 1)
    throw DeckError("deck: '" + path + "' holds " + std::to_string(docs.size()) + " YAML documents; a deck is one");
  if (docs.empty() || !docs[0] || docs[0].IsNull())
    throw DeckError("deck: '" + path + "' is empty (a deck is a map of sections: model, run, ...)");
  if (!docs[0].IsMap()) throw DeckError("deck: '" + path + "' must be a map of sections");
  return docs[0];
}

// The keys a deck file sets: "section.key" -> text. Refuses unknown or repeated
// sections and keys, empty sections, values that are not plain, and a deck setting no key.
std::map<std::string, std::string> keys_in_file(const std::string& path) {
  const YAML::Node root = read_deck_file(path);
  std::map<std::string, std::string> given;
  std::set<std::string> sections;
  for (const auto& section : root) {
    if (!section.first.IsScalar()) throw DeckError("deck: a section name must be a plain word");
    const auto sname = section.first.Scalar();
    if (known_keys(sname).empty()) unknown_key(sname, "");
    if (!sections.insert(sname).second) throw DeckError("deck: section '" + sname + "' appears twice");
    if (!section.second.IsNull() && !section.second.IsMap())
      throw DeckError("deck: section '" + sname + "' must be a map of keys");
    if (section.second.IsNull() || section.second.size() == 0)  // a typo'd indent, or a deck cut short
      throw DeckError("deck: section '" + sname + "' is empty: give its keys or leave the section out "
                      "(a missing section or key takes its default; `minilst keys` lists them)");
    for (const auto& kv : section.second) {
      if (!kv.first.IsScalar()) throw DeckError("deck: a key of section '" + sname + "' must be a plain word");
      const auto key = kv.first.Scalar();
      if (!find_key(sname, key)) unknown_key(sname, key);
      if (!kv.second.IsScalar()) throw DeckError("deck: " + sname + "." + key + " must be a single value");
      if (!given.emplace(sname + "." + key, kv.second.Scalar()).second)
        throw DeckError("deck: " + sname + "." + key + " is given twice");
    }
  }
  if (given.empty())
    throw DeckError("deck: '" + path + "' sets no key (a deck is a map of sections with keys: model, run, ...; "
                    "`minilst keys` lists them)");
  return given;
}

// The keys that define the problem (RUN_RULES.md): changing one changes the loss curve.
bool defines_problem(const KeySpec& spec) {
  static const std::set<std::string> run = {"seq_len", "grad_accum", "seed", "documents", "learning_rate",
                                            "weight_decay", "init_std", "init_std_qk", "norm_init_noise"};
  return spec.section == "model" || (spec.section == "run" && run.count(spec.key));
}

// Keys added after decks carried reference digests: mixed in only when set, so that a deck
// without them keeps its digest.
bool mixed_only_when_set(const std::string& name) {
  return name == "model.sliding_window" || name == "model.sliding_window_layers" || name == "run.documents" ||
         name == "run.init_std_qk";
}

// The window's layers as the problem sees them: the layers selected ("0 2"), "" when the
// window holds in every layer (or there is none): one problem, one digest, however written.
std::string windowed_layers_text(const ModelConfig& m) {
  const auto layers = m.sliding_window_layers.of(m.layers);
  if (m.sliding_window == 0 || int(layers.size()) == m.layers) return "";
  std::string text;
  for (const int l : layers) text += (text.empty() ? "" : " ") + std::to_string(l);
  return text;
}

// 64-bit FNV-1a of "key=value;" over the problem's keys in schema order, in hex: the
// resolved values (integers as numbers, floats in their shortest exact text).
std::string problem_digest(const std::map<std::string, Value>& v) {
  Fnv1a digest;
  for (const auto& spec : schema()) {
    if (!defines_problem(spec)) continue;
    const Value& x = v.at(spec.name());
    const bool unset = spec.kind == Kind::Int ? x.i == 0 : spec.kind == Kind::Float ? x.f == 0 : x.text.empty();
    if (mixed_only_when_set(spec.name()) && unset) continue;
    digest.add(spec.name() + "=" + (spec.kind == Kind::Int ? std::to_string(x.i) : x.text) + ";");
  }
  return digest.hex();
}

// The deck of `given` keys ("section.key" -> text; from a file at `path`, or none), the
// overrides applied, every key converted and every rule checked.
Deck deck_of(std::map<std::string, std::string> given, const std::string& path, const std::vector<std::string>& overrides) {
  for (const auto& o : overrides) {
    const auto eq = o.find('='), dot = o.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq)
      throw DeckError("--set '" + o + "': expected section.key=value");
    const auto section = o.substr(0, dot), key = o.substr(dot + 1, eq - dot - 1);
    if (!find_key(section, key)) unknown_key(section, key);
    given[section + "." + key] = o.substr(eq + 1);
  }

  std::map<std::string, Value> v;
  for (const auto& spec : schema()) {
    const auto it = given.find(spec.name());
    v[spec.name()] = convert(spec, it == given.end() ? spec.default_value : it->second);
  }

  Deck d;
  d.path = path;
  for (const auto& spec : schema()) spec.set(d, v.at(spec.name()));
  const auto& m = d.model;
  const auto& r = d.run;

  // Rules that relate keys.
  const auto n = [](long long x) { return std::to_string(x); };
  check(m.hidden % m.heads == 0, "model.hidden (" + n(m.hidden) + ") is not divisible by model.heads (" +
                                     n(m.heads) + ")");
  check(m.head_dim() % 2 == 0, "head dim model.hidden/model.heads = " + n(m.head_dim()) +
                                   " must be even (RoPE rotates pairs)");
  check(m.heads % m.kv_heads == 0, "model.heads (" + n(m.heads) + ") is not divisible by model.kv_heads (" +
                                       n(m.kv_heads) + ")");
  check(r.warmup_steps < r.steps, "run.warmup_steps (" + n(r.warmup_steps) + ") must be < run.steps (" +
                                      n(r.steps) + "), or no step is measured");
  check(d.output.metrics != "", "output.metrics must name a file (or be 'auto')");
  check_output_paths(d);
  const double bandwidth = d.options.offload.bandwidth_gbs;
  check(bandwidth == 0 || bandwidth >= kMinOffloadBandwidthGBs,
        "memory.offload_bandwidth_gbs = " + yaml_float(bandwidth) + ": a cap below " +
            yaml_float(kMinOffloadBandwidthGBs) + " GB/s (1 MB/s) would stall every step; 0 = unthrottled");
  check_sizes(d);
  // The parallel rules that need no world size (that one is checked at start, where an auto
  // Ulysses degree and its head chunks are resolved too).
  ParallelConfig alone = d.parallel;
  if (alone.ulysses == 0) alone.ulysses = 1, alone.ulysses_head_chunks = 1;
  const auto parallel_error = check_parallel(m, alone, r.seq_len, alone.sequence_parallel() * alone.tensor);
  check(parallel_error.empty(), parallel_error);

  // The window's layers: layers of the model, at least one, and only with a window.
  if (!m.sliding_window_layers.is_all()) {
    const std::string key = "model.sliding_window_layers = '" + v.at("model.sliding_window_layers").text + "': ";
    check(m.sliding_window > 0, key + "a pattern of windowed layers needs model.sliding_window > 0");
    const auto why = m.sliding_window_layers.problem(m.layers);
    check(why.empty(), key + why);
    check(!m.sliding_window_layers.of(m.layers).empty(),
          key + "selects none of the model's " + n(m.layers) + " layers (model.sliding_window = 0: no window)");
  }
  try {  // packed documents and the sliding window: the attention mask of every sequence
    d.options.mask = {document_starts(r.documents, r.seq_len, r.seed), m.sliding_window, m.sliding_window_layers};
  } catch (const std::invalid_argument& e) {
    throw DeckError(std::string("run.documents = ") + e.what());
  }
  auto problem = v;
  problem["model.sliding_window_layers"].text = windowed_layers_text(m);
  d.problem_digest = problem_digest(problem);

  YAML::Emitter out;
  out << YAML::BeginMap;
  std::string section;
  for (const auto& spec : schema()) {
    if (spec.section != section) {
      if (!section.empty()) out << YAML::EndMap;
      section = spec.section;
      out << YAML::Key << section << YAML::Value << YAML::BeginMap;
    }
    out << YAML::Key << spec.key << YAML::Value << v.at(spec.name()).text;
  }
  out << YAML::EndMap << YAML::EndMap;
  d.resolved_yaml = out.c_str();
  return d;
}
}  // namespace

Deck load_deck(const std::string& path, const std::vector<std::string>& overrides) {
  return deck_of(keys_in_file(path), path, overrides);
}

Deck built_in_deck(const std::vector<std::string>& keys) { return deck_of({}, "", keys); }

std::string deck_key_reference() {
  std::ostringstream s;
  for (const auto& k : schema()) {
    std::string rule;
    if (k.kind == Kind::Choice) {
      for (const auto& c : k.choices) rule += (rule.empty() ? "" : "|") + c;
    } else if (k.kind == Kind::ChunkCount) {
      rule = "integer in [1, " + integer_text(k.max) + "] | auto";
    } else if (k.kind == Kind::Int) {
      rule = "integer in [" + integer_text(k.min) + ", " + integer_text(k.max) + "]";
    } else if (k.kind == Kind::Float) {
      const std::string low = k.min > 0 && k.min <= 1e-300 ? "(0" : "[" + yaml_float(k.min);
      rule = k.max < HUGE_VAL ? "number in " + low + ", " + yaml_float(k.max) + "]"
                              : k.min > 0 ? "number > 0" : "number >= " + yaml_float(k.min);
      if (k.or_auto) rule += " | auto";
    } else {
      rule = k.kind == Kind::Numbers ? "numbers" : k.kind == Kind::Text ? "text" : "path";
    }
    s << "  " << k.name() << std::string(k.name().size() < 22 ? 22 - k.name().size() : 1, ' ') << "default "
      << (k.default_value.empty() ? "\"\"" : k.default_value) << "  (" << rule << ")  " << k.help << "\n";
  }
  return s.str();
}

}  // namespace minilst
