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
// Where a run stands after a step: seconds since its first step began, and the steps left times
// the mean of the measured steps so far (of every step while none is measured yet).
struct StepProgress {
  double elapsed_s = 0, eta_s = 0;
};
// "step 3/10  loss ..  |grad| ..  0.227 s  4509.8 tokens/s  device 123.9 MiB  14:02:11Z  elapsed 0:00:01
// eta 0:00:02" (rank 0's line; the clock UTC; " (warm-up)" on the warm-up steps).
void print_step(long step, const Deck& deck, double loss, double grad_norm, double seconds, double tokens_per_step,
                const StepProgress& progress);
void print_summary(const RunSummary& s, const std::string& path);
// The reference check and the RESULT line; returns the exit code (0 VALID, 3 INVALID, 4 stopped early).
int print_result(const RunSummary& s, const RunMetrics& m, const Deck& deck, int nranks, const std::string& path);

}  // namespace minilst
