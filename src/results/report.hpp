// What rank 0 prints: the run's set-up before the first step, a line per step,
// the summary and the final RESULT line (the one a batch log is grepped for).
#pragma once

#include <string>

#include "attention/attention_geometry.hpp"
#include "io/deck.hpp"
#include "results/metrics.hpp"

namespace minilst {

// Threads, parallel layout, mini-sequence counts (and `offload`, the offload controller's line, when non-empty).
void print_setup(const Deck& deck, const ModelOptions& opts, const AttentionGeometry& g, int nranks,
                 int data_parallel, std::size_t scalar_bytes, const std::string& offload);
void print_step(long step, const Deck& deck, double loss, double grad_norm, double seconds, double tokens_per_step);
void print_summary(const RunSummary& s, const std::string& path);
// The reference check and the RESULT line; returns the exit code (0 VALID, 3 INVALID, 4 stopped early).
int print_result(const RunSummary& s, const RunMetrics& m, const Deck& deck, int nranks, const std::string& path);

}  // namespace minilst
