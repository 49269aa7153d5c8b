// The metrics file (docs/metrics.md). Every rank holds every rank's records of the
// finished steps (one all-gather per step), so any rank can write it; normally rank 0
// does, to a temporary name renamed when complete.
//   /loss [steps]                      /timings/<phase> [steps, ranks] s
//   /memory/<category> [ranks] B       /memory/model/<category> [ranks] B (analytic)
//   /throughput/{tokens_per_s, model_tflops} [steps]
//   /comm/<op>/bytes [steps, ranks] B sent to other ranks   /comm/<op>/model_bytes [ranks] (analytic, per step)
//   /offload/bytes_to_host, /offload/bytes_to_device [steps, ranks] B moved by the copy engine
//   /memory/plan/{arena_bytes, lower_bound_bytes, unplanned_peak_bytes} [ranks] B (memory.planner: plan)
//   /memory/plan/allocations_per_step [steps, ranks]
//   /predicted/<phase> scalar s per step (run.machine only), attributes measured, ratio (predicted / measured)
//   /attention/{flops,bytes}_{forward,backward} [steps, ranks] the attention work the kernels do
//   (attention/attention_work.hpp: computed tiles only); /attention/hop_{flops,bytes} [ranks, R] per ring hop
//   root attributes: schema, provenance (Adiak keys), build, run keys, config, valid, fom,
//   complete, stop_reason, steps_done.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/attributes.hpp"
#include "core/comm_ops.hpp"
#include "core/phases.hpp"
#include "predict/prediction.hpp"
#include "results/run_rules.hpp"

namespace minilst {

// The communication operations every rank reports (/comm/<op>/bytes): a step's (core/comm_ops.hpp).
const std::vector<CommOp>& metric_comm_ops();
// The copy engine's directions every rank reports (/offload/bytes_<direction>).
const std::vector<std::string>& metric_offload_directions();

struct StepMetrics {
  double loss = 0;
  double grad_norm = 0;
  PhaseSeconds seconds{};  // phase -> seconds (this rank)
  CommBytes comm_bytes{};  // operation -> bytes sent to other ranks
  std::map<std::string, std::uint64_t> offload_bytes;  // to_host | to_device -> bytes the copy engine moved
  std::uint64_t allocations = 0;                     // buffers allocated (not taken from the step arena)
  double energy_joules = 0;  // energy of the step that this rank's meters read (its node's CPUs, its GPU); 0: none
};

struct RunMetrics {
  std::vector<StepMetrics> steps;                  // this rank, every step
  std::map<std::string, std::uint64_t> memory;     // category -> high-water bytes (this rank)
  std::map<std::string, std::uint64_t> memory_model;  // category -> analytic prediction (this rank)
  std::map<std::string, std::uint64_t> plan;          // arena_bytes, lower_bound_bytes, unplanned_peak_bytes
  CommBytes comm_model{};                             // operation -> analytic bytes per step (this rank)
  // The attention work of every step (this rank; the mask is the run's, so every step's):
  // flops_forward, flops_backward, bytes_forward, bytes_backward; and per ring hop [R].
  std::map<std::string, double> attention;
  std::vector<double> attention_hop_flops, attention_hop_bytes;
  RunAttributes attributes;                        // root attributes (provenance, run keys, measurements)
  std::string config_yaml;
  std::vector<double> expected_loss;  // the deck's reference answer per step (empty: no check)
  double reference_rtol = 0;
  bool complete = true;     // false: stopped early (stop_reason), or a flush during the run
  std::string stop_reason;  // why the run stopped before run.steps ("" when complete)
  int warmup_steps = 0;
  double tokens_per_step = 0;   // global tokens of one optimizer step
  double flops_per_step = 0;    // model FLOPs of one optimizer step
  StepFlops flops{};            // ... in each of MFU's conventions (predict/flops.hpp)
  // Per rank, GFLOP/s: the dense GEMM rate of the run's precision measured in this run
  // (kernels/gemm_rate.hpp; mean over ranks), the device's nominal peak where it is known (0:
  // unknown), and MFU's fixed peak (results/mfu_peak.hpp: datasheet, machine file or stored host peak).
  double peak_gflops = 0, nominal_peak_gflops = 0, mfu_peak_gflops = 0;
  RunRuleFacts rules;  // what the run rules need to know besides the steps (the build, the deck)
  // Where the steps' energy comes from ("rapl", "nvml", "rapl+nvml"), or "unavailable" with the reason in energy_note.
  std::string energy_source = "unavailable";
  std::string energy_note = "not measured";
  PredictedTime prediction;  // the run's prediction on run.machine (not known: none)
};

struct RunSummary {  // what rank 0 prints
  bool valid = false;
  double fom = 0;  // tokens/s per rank: tokens of a step / ranks / mean measured step time (slowest rank)
  EnumMap<Phase, std::vector<double>> phase_avg_per_rank;         // phase -> [ranks] mean s/step
  std::map<std::string, std::vector<std::uint64_t>> memory;       // category -> [ranks]
  std::map<std::string, std::vector<std::uint64_t>> memory_model; // category -> [ranks], predicted
  EnumMap<CommOp, std::vector<double>> comm_bytes;                // operation -> [ranks] mean B per measured step
  std::map<std::string, std::vector<std::uint64_t>> plan;         // arena_bytes, ... -> [ranks]
  std::vector<std::uint64_t> allocations_after_first;             // [ranks] most allocations in a step after the first
  std::vector<double> slowest_step_seconds;                       // [steps] the slowest rank's step time
  // The attention FLOPs of a step (forward + backward) per rank, and their max / mean over
  // ranks (1: balanced; 0: not counted).
  std::vector<double> attention_flops;
  double attention_imbalance = 0;
  // Model FLOPs utilisation against MFU's fixed peak (results/mfu_peak.hpp; 0: no peak): the
  // step's (model FLOPs of the measured steps / their time / ranks / peak) and per phase (this
  // rank's FLOPs of the phase / its mean time, averaged over ranks): attention, mlp, lm_head.
  bool mfu_known = false;  // measured steps and a peak
  double mfu = 0, mfu_nominal = 0;  // the model-FLOPs convention (the RESULT line's)
  EnumMap<FlopsConvention, double> mfu_conventions{};  // every convention, over the same peak
  EnumMap<Phase, double> mfu_phase{};  // attention, mlp, lm_head (0: not known)
  double peak_gflops = 0, nominal_peak_gflops = 0, mfu_peak_gflops = 0;  // per rank (RunMetrics')
  std::string reference_check = "none";   // none | PASSED | FAILED: the losses against the deck's reference
  double reference_max_rel_error = 0;     // over the steps compared
  int reference_steps = 0, reference_worst_step = 0;  // steps compared; the worst (1-based)
  int measured_steps = 0;                 // the steps after the warm-up
  Reportability reportable;               // the run rules' verdict
  // Energy (energy_known: a meter ran): the measured steps' joules over every rank's meters, the
  // whole run's, and the tokens of the measured steps per joule.
  bool energy_known = false;
  std::string energy_source, energy_note;  // RunMetrics'
  double energy_joules = 0, energy_joules_run = 0, tokens_per_joule = 0;
  // With run.machine: the prediction, the measured side (the busiest rank's mean over the measured
  // steps: the Max time/rank of /timings/<phase>) and predicted / measured per phase (where measured > 0).
  PredictedTime prediction;
  EnumMap<Phase, std::optional<double>> prediction_measured, prediction_ratio;
};

// Every rank's records on rank 0, by name: [steps x ranks] (row-major) or [ranks].
struct GatheredMetrics {
  int nranks = 1, nsteps = 0;
  EnumMap<Phase, std::vector<double>> seconds;                       // phase -> [steps x ranks]
  EnumMap<CommOp, std::vector<std::uint64_t>> comm_bytes;            // operation -> [steps x ranks] (a step's ops)
  EnumMap<CommOp, std::vector<std::uint64_t>> comm_model;            // operation -> [ranks]
  std::map<std::string, std::vector<std::uint64_t>> offload_bytes;   // to_host | to_device -> [steps x ranks]
  std::vector<std::uint64_t> allocations;                            // [steps x ranks]
  std::vector<double> energy;                                         // [steps x ranks] J
  std::map<std::string, std::vector<std::uint64_t>> memory, memory_model, plan;  // key -> [ranks]
  std::map<std::string, std::vector<double>> attention;  // flops_forward, ... -> [ranks]; hop_flops, hop_bytes -> [ranks x R]
};

// Collective over comm: one step's per-rank records, on every rank (an all-gather).
GatheredMetrics gather_step(MPI_Comm comm, const StepMetrics& step);
// Appends the steps of `from` to `to` (same ranks).
void append_steps(GatheredMetrics& to, const GatheredMetrics& from);
// Collective over comm: every rank's memory, plan and models, on every rank.
void gather_totals(MPI_Comm comm, const RunMetrics& local, GatheredMetrics& gathered);
// Validity, figure of merit, per-rank means over the measured steps.
RunSummary summarise_metrics(const GatheredMetrics& gathered, const RunMetrics& local);
// The line a batch log is grepped for:
//   "RESULT: <verdict> FOM=... steps=... final_loss=... ranks=... MFU=... tier=... reportable=yes|no (rules) metrics=...".
// mfu < 0: not known (no MFU= field); tier "": not known (files written before the tiers; no tier= field);
// reportable "": not known (files written before the run rules).
std::string result_line(const std::string& verdict, double fom, std::size_t steps, double final_loss, int nranks, double mfu,
                        const std::string& tier, const std::string& reportable, const std::string& path);
// The RESULT line of a metrics file, and the exit code its run gave (0 VALID, 3 INVALID, 4 INCOMPLETE).
// Throws runtime_error, one line naming the file and what is wrong, for a file that is missing, empty,
// a directory, not HDF5, of another schema or unreadable (truncated, corrupt, a value the writer never
// writes). HDF5 reads it in a child process (h5::read_isolated) with its diagnostics silenced: HDF5
// crashing or hanging on a corrupt file is such an error too.
std::pair<std::string, int> result_of_file(const std::string& path);
// The metrics file, written atomically (h5::AtomicFile: built as path + partial_suffix, then renamed).
// Its JSON summary is results/json_summary.hpp's (the recorder writes both).
void write_metrics_file(const std::string& path, const GatheredMetrics& gathered, const RunSummary& summary,
                        const RunMetrics& local, const std::string& partial_suffix = ".partial");

}  // namespace minilst
