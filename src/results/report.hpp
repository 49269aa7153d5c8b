// What rank 0 prints: the run's set-up before the first step, a line per step,
// the summary and the final RESULT line (the one a batch log is grepped for).
#pragma once

#include <map>
#include <string>

#include "attention/attention_geometry.hpp"
#include "core/kernel_choice.hpp"
#include "io/deck.hpp"
#include "results/metrics.hpp"

namespace minilst {

// Threads, parallel layout, mini-sequence counts (and `offload`, the offload controller's line, when non-empty).
// model_states: the memory model's bytes of the model states per rank.
void print_setup(const Deck& deck, const ModelOptions& opts, const ResolvedKernels& kernels,
                 const std::map<std::string, std::uint64_t>& model_states, const AttentionGeometry& g, int nranks,
                 int data_parallel, std::size_t scalar_bytes, const std::string& offload);
void print_step(long step, const Deck& deck, double loss, double grad_norm, double seconds, double tokens_per_step);
void print_summary(const RunSummary& s, const std::string& path);
// The reference check and the RESULT line; returns the exit code (0 VALID, 3 INVALID, 4 stopped early).
int print_result(const RunSummary& s, const RunMetrics& m, const Deck& deck, int nranks, const std::string& path);

}  // namespace minilst
