// The metrics record of a run, assembled in one place: what it is before the
// first step (tokens and model FLOPs per step, the reference answer, the deck),
// and what the metrics file holds besides the steps (the memory reached and the
// memory model's prediction of it, the arena plan, the communication model,
// provenance, the run's keys and the attributes its parts report).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "attention/attention_geometry.hpp"
#include "core/attributes.hpp"
#include "core/kernel_choice.hpp"
#include "core/range.hpp"
#include "io/deck.hpp"
#include "predict/prediction.hpp"
#include "results/metrics.hpp"
#include "parallel/parallel_setup.hpp"

namespace minilst {

// Before the first step. D data-parallel replicas, P sequence-parallel ranks; the FLOPs and the
// predicted time from the run's prediction.
RunMetrics start_run_metrics(const Deck& deck, int data_parallel, int sequence_parallel, const Prediction& prediction);

// What the run decided, for the record.
struct RunFacts {
  AttentionGeometry geometry;   // this rank's
  ModelOptions options;         // chunk counts as resolved; offload alpha: the last step's
  ResolvedKernels kernels;      // the run's kernel choice, with its reasons and probes
  RankPrediction predicted;     // this rank's part of the run's prediction at the options' alpha (results/run.hpp)
  double host_alpha = 0;        // the run's largest offload alpha (sized the host buffers)
  RunAttributes reported;       // from the run's parts (the offload controller, ...)
  int argc = 0;
  char** argv = nullptr;
};
// Collective over the world (provenance gathers host names).
void record_run(RunMetrics& metrics, const Deck& deck, ParallelSetup& par, const RunFacts& facts);

// What a run is, as its files are named: <deck stem>_<layout>_<ranks>r, the layout
// single, u<U>, r<R> or u<U>xr<R>, with _dp<D> under data parallelism.
std::string run_name(const Deck& deck, int nranks);
// output.metrics: the deck's path, or for "auto"
// <run name>_<UTC time>_<SLURM_JOB_ID or "local">[_<SLURM_ARRAY_TASK_ID>]_<pid>.h5,
// unique for runs started in the same second (the process id), in the same job step too;
// the Slurm identifiers' characters other than [A-Za-z0-9._-] become '_' (job/slurm_ids.hpp).
std::string metrics_path(const Deck& deck, int nranks);

}  // namespace minilst
