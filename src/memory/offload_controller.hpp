// The orchestration of the offload policies (checkpoint_offload, offload), beside
// the store it drives:
//   before the first step  the policy's host footprint (ActivationStore::host_bytes)
//                          against the host budget: refused with the numbers, the same
//                          verdict on every rank; offload with alpha auto starts at the
//                          largest alpha the budget allows (of memory.offload_alpha_values),
//                          so the warm-up step measures the most traffic (and sizes the
//                          host buffers once)
//   after the first step   MEMO's alpha (offload_alpha.hpp) from what that step measured:
//                          the copy engine's bandwidth and one layer's forward time,
//                          the smallest over ranks, continuous or one of MEMO's values;
//                          later forwards are not timed (ActivationStore::stop_timing_forward)
//   metrics               offload_* root attributes (engine, measurements, budget, alpha)
// Collective over `comm` where it says so.
#pragma once

#include <mpi.h>

#include <string>

#include "core/attributes.hpp"
#include "core/config.hpp"
#include "memory/activation_store.hpp"
#include "memory/offload_alpha.hpp"

namespace minilst {

// The largest alpha whose host footprint fits `budget_bytes` (a multiple of 1/S:
// alpha S tokens), or a negative value when not even alpha = 0 fits. The footprint
// grows by the same bytes per token row from one row on; from alpha 0 to one row it
// may jump (a strategy's kept q, k, v, o travel only at alpha > 0).
template <class T>
double host_alpha_max(MemoryPolicy policy, int layers, const ActivationShapes& shapes, double budget_bytes,
                      int mlp_chunks = 1);

struct OffloadSettings {
  bool alpha_auto = true;     // memory.offload_alpha: auto
  double budget_bytes = 0;    // host memory per rank for offloaded activations
  bool budget_auto = true;    // memory.host_budget_mib: auto (for the messages)
  AlphaValues values = AlphaValues::continuous;  // memory.offload_alpha_values: the alphas auto may choose
};

template <class T>
class OffloadController {
 public:
  // Collective. Checks the budget; sets opts.offload.alpha to the warm-up step's
  // alpha when auto. error() says why the run cannot start ("" when it can).
  OffloadController(ModelOptions& opts, int layers, const ActivationShapes& shapes, const OffloadSettings& settings,
                    MPI_Comm comm);

  const std::string& error() const { return error_; }
  bool active() const { return active_; }
  // The largest alpha of the run: what sizes the host buffers.
  double largest_alpha() const { return alpha_max_used_; }

  std::string describe(const ActivationStore<T>& store) const;  // the start-up line (rank 0 prints it)
  // Collective. After the first step: measures, stops the store's forward timing, and
  // with alpha auto solves and sets the store's alpha.
  void after_first_step(ActivationStore<T>& store, const CopyEngine::Counters& moved, MPI_Comm comm, bool print);
  RunAttributes attributes(const ActivationStore<T>& store) const;

 private:
  MemoryPolicy policy_;
  int layers_, mlp_chunks_;
  ActivationShapes shapes_;
  OffloadSettings settings_;
  bool active_ = false;
  double alpha_host_max_ = 1, alpha_max_used_ = 0, bandwidth_cap_gbs_ = 0;
  double bandwidth_ = 0, layer_seconds_ = 0;  // measured in the first step (bytes/s, s)
  std::string error_;
};

}  // namespace minilst
