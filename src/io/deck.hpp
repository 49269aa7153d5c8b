// The input deck: a YAML file with sections model, run, parallel, mst, memory,
// output, reference, overridden by `--set section.key=value`. Every key is one
// row of the table in deck.cpp: its default, its rule, where its value goes, and
// for choices the names of the enum it sets (also printed by `minilst keys`); an
// unknown key or a bad value is a DeckError whose message names the key and what
// is allowed.
#pragma once

#include <algorithm>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/parallel_config.hpp"
#include "memory/offload_alpha.hpp"
#include "memory/planner.hpp"

namespace minilst {

struct DeckError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RunConfig {
  std::int64_t seq_len = 0;
  int steps = 0, warmup_steps = 0, grad_accum = 1;
  Precision precision = Precision::float32;
  std::uint64_t seed = 0;
  std::string documents;  // run.documents: the packed documents' lengths or distribution ("" = one)
  double learning_rate = 0, weight_decay = 0, init_std = 0, norm_init_noise = 0;
  double init_std_qk = 0;  // Wq's and Wk's init std (0: init_std); verify raises it (peaked attention scores)
  double time_limit_s = 0;  // stop cleanly before this budget (0: none)
  double watchdog_s = 0;    // end the rank when no step finishes for this long (0: auto)
  std::string tier = "baseline";  // run.tier: the procurement tier the run claims (RUN_RULES.md)
  std::string machine;  // run.machine: a machine file the run prices its step on and checks against ("" = none)
};

struct ChunkSetting {
  bool automatic = true;  // choose from mst.chunk_budget_mib
  int count = 1;          // when not automatic
};

struct MstConfig {  // mini-sequence MLP and LM head
  ChunkSetting mlp, lm_head;
  double budget_mib = 256;
};

struct MemoryConfig {  // memory.*: the activation policy's run-time choices
  bool alpha_auto = true;         // memory.offload_alpha: auto (solved from the warm-up step)
  AlphaValues alpha_values = AlphaValues::continuous;  // memory.offload_alpha_values: the alphas auto chooses among
  double host_budget_mib = 0;     // memory.host_budget_mib (resolved when auto)
  bool host_budget_auto = true;   // auto: 3/4 of the node's memory, shared by its ranks
  bool optimizer_offload = false; // memory.optimizer_offload: AdamW states in host memory
  bool plan = true;               // memory.planner: plan (arena) | none
  PlanSolver solver = PlanSolver::greedy;  // memory.planner_solver: greedy | exact (GLPK)
};

struct OutputConfig {
  std::string metrics;  // HDF5 metrics file path ("auto": named by the run, io/run_record.hpp)
  std::string dump;     // tensor dump path ("" = none)
  bool overwrite = false;  // replace an existing file that is not a miniLST output of the same kind
  long long flush_every = 0;  // write the metrics every this many steps too (0: not by steps)
  double flush_seconds = 600;  // and after step 1 and every this many seconds of run time (0: not by time)
};

struct ReferenceConfig {  // the expected answer: a run is VALID only if its losses match
  std::vector<double> losses;  // expected loss of steps 1, 2, ... (empty: no check)
  double rtol = 1e-4;
  std::string problem;  // the digest of the problem the losses belong to ("" = not checked)
};

struct Deck {
  ModelConfig model;
  RunConfig run;
  MstConfig mst;
  ParallelConfig parallel;
  ModelOptions options;  // memory.policy, offload alpha and bandwidth, run.kernels; chunk counts resolved by resolve_chunks
  MemoryConfig memory;
  OutputConfig output;
  ReferenceConfig reference;
  std::string path;           // the deck file
  std::string resolved_yaml;  // every key with its resolved value
  std::string problem_digest; // of the keys that define the problem (reference.problem)
  bool problem_matches_reference() const { return reference.problem.empty() || reference.problem == problem_digest; }
};

// The loss tolerance of bf16 mixed precision against the float64 answer (relative):
// a bf16 run's reference check uses at least this.
constexpr double kBf16LossTolerance = 5e-3;
inline double reference_tolerance(const Deck& deck) {
  const double rtol = deck.reference.rtol;
  return deck.run.precision == Precision::bf16 && rtol < kBf16LossTolerance ? kBf16LossTolerance : rtol;
}

// Where the deck keeps the model states (parallel.zero, memory.optimizer_offload) on a job of `ranks`.
// ranks: the job's; the states are sharded over those holding the same tensor-parallel slice.
inline ZeroOptions zero_options(const Deck& deck, int ranks) {
  return ZeroOptions{deck.parallel.zero, deck.memory.optimizer_offload, ranks / std::max(1, deck.parallel.tensor)};
}

// run.machine's value that measures the job's machine at start instead of reading a file.
constexpr const char* kMachineProbeAtStart = "probe";

// Reads, overrides and validates. Throws DeckError.
Deck load_deck(const std::string& path, const std::vector<std::string>& overrides);

// A deck of "section.key=value" settings alone (every other key its default), for decks a
// program builds itself (the probe's calibration step); checked as a file's. Throws DeckError.
Deck built_in_deck(const std::vector<std::string>& keys);

// The key reference: one line per key with default and rule.
std::string deck_key_reference();

}  // namespace minilst
