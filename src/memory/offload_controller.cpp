#include "memory/offload_controller.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/units.hpp"
#include "kernels/bf16.hpp"
#include "memory/offload_alpha.hpp"
#include "memory/step_arena.hpp"

namespace minilst {

namespace {

std::string mib(double bytes) {
  char text[48];
  std::snprintf(text, sizeof text, "%.2f MiB", bytes / kMiB);
  return text;
}
}  // namespace

template <class T>
double host_alpha_max(MemoryPolicy policy, int L, const ActivationShapes& shapes, double budget, int mlp_chunks) {
  const std::int64_t S = shapes.tokens;
  const auto host = [&](std::int64_t rows) {  // the footprint with `rows` token rows in host memory
    return double(ActivationStore<T>::host_bytes(policy, L, shapes, double(rows) / double(S), mlp_chunks));
  };
  const double at0 = host(0);
  if (at0 > budget) return -1.0;
  const double at1 = host(S);
  if (at1 <= budget || at1 == at0) return 1.0;
  if (S <= 1 || host(1) > budget) return 0.0;
  // from one row on, host grows by (at1 - host(1)) / (S - 1) per row: the most rows that fit
  const double first = host(1), per_row = (at1 - first) / double(S - 1);
  auto rows = std::clamp<std::int64_t>(1 + std::int64_t(std::floor((budget - first) / per_row)), 1, S);
  while (rows > 1 && host(rows) > budget) --rows;  // the division's rounding, either way
  while (rows < S && host(rows + 1) <= budget) ++rows;
  return double(rows) / double(S);
}

template <class T>
OffloadController<T>::OffloadController(ModelOptions& opts, int layers, const ActivationShapes& shapes,
                                        const OffloadSettings& settings, MPI_Comm comm)
    : policy_(opts.policy), layers_(layers), mlp_chunks_(opts.mlp_chunks), shapes_(shapes), settings_(settings),
      active_(uses_host_memory(opts.policy)), bandwidth_cap_gbs_(opts.offload.bandwidth_gbs) {
  if (!active_) return;
  // Every rank decides alike: the smallest bound, and the largest need at alpha 0 or at the deck's alpha.
  double bound = host_alpha_max<T>(policy_, layers, shapes, settings.budget_bytes, mlp_chunks_);
  double need[2] = {double(ActivationStore<T>::host_bytes(policy_, layers, shapes, 0.0, mlp_chunks_)),
                    double(ActivationStore<T>::host_bytes(policy_, layers, shapes, opts.offload.alpha, mlp_chunks_))};
  MPI_Allreduce(MPI_IN_PLACE, &bound, 1, MPI_DOUBLE, MPI_MIN, comm);
  MPI_Allreduce(MPI_IN_PLACE, need, 2, MPI_DOUBLE, MPI_MAX, comm);
  alpha_host_max_ = bound;
  const std::string budget = "memory.host_budget_mib allows " + mib(settings.budget_bytes) + " per rank" +
                             (settings.budget_auto ? " (auto: 3/4 of the node's memory / its ranks)" : "");
  const bool offload = policy_ == MemoryPolicy::offload;
  if (bound < 0) {
    error_ = "memory.policy " + name_of(policy_) + " needs " + mib(need[0]) + " of host memory per rank" +
             (offload ? " even at memory.offload_alpha = 0" : "") + ", but " + budget;
    return;
  }
  if (offload && settings.alpha_auto) {
    opts.offload.alpha = allowed_alpha(std::min(1.0, bound), settings.values);  // the warm-up step: the largest
  } else if (offload && opts.offload.alpha > bound) {
    char alpha[64], largest[32];
    std::snprintf(alpha, sizeof alpha, "%g", opts.offload.alpha);
    std::snprintf(largest, sizeof largest, "%.4f", bound);
    error_ = std::string("memory.offload_alpha = ") + alpha + " needs " + mib(need[1]) +
             " of host memory per rank, but " + budget + " (the largest alpha that fits: " + largest + ")";
    return;
  }
  alpha_max_used_ = offload ? opts.offload.alpha : 0.0;
}

template <class T>
std::string OffloadController<T>::describe(const ActivationStore<T>& store) const {
  char line[512];
  std::snprintf(line, sizeof line, "offload: copy engine %s, host budget %.0f MiB per rank (%s), host memory %.2f MiB per rank",
                store.engine() ? store.engine()->name().c_str() : "none", settings_.budget_bytes / kMiB,
                settings_.budget_auto ? "auto" : "deck",
                double(ActivationStore<T>::host_bytes(policy_, layers_, shapes_, store.alpha(), mlp_chunks_)) / kMiB);
  std::string out = line;
  if (policy_ == MemoryPolicy::offload) {
    std::snprintf(line, sizeof line, ", alpha %s %.4f%s%s", settings_.alpha_auto ? "auto: warm-up at" : "=",
                  store.alpha(), settings_.alpha_auto && settings_.values == AlphaValues::memo ? " (MEMO's values)" : "",
                  alpha_host_max_ < 1 ? " (bounded by the host budget)" : "");
    out += line;
  }
  return out;
}

template <class T>
void OffloadController<T>::after_first_step(ActivationStore<T>& store, const CopyEngine::Counters& moved,
                                            MPI_Comm comm, bool print) {
  if (!active_) return;
  bandwidth_ = moved.busy_seconds > 0 ? double(moved.bytes_to_host + moved.bytes_to_device) / moved.busy_seconds : 0;
  layer_seconds_ = store.forward_layer_seconds();
  store.stop_timing_forward();
  if (!(policy_ == MemoryPolicy::offload && settings_.alpha_auto)) return;
  const auto bytes = ActivationStore<T>::layer_copy_bytes(shapes_, mlp_chunks_);
  const AlphaInputs in{bytes.x, bytes.o, bytes.rest, bandwidth_, layer_seconds_, alpha_host_max_};
  double alpha = solve_alpha(in, settings_.values);  // the minimum over ranks of values of the set is one of them
  MPI_Allreduce(MPI_IN_PLACE, &alpha, 1, MPI_DOUBLE, MPI_MIN, comm);
  // A new alpha changes the step's buffers (the recompute range): the next step records
  // and plans them afresh rather than run beside step 0's arena.
  if (alpha != store.alpha()) StepArena::instance().forget_plan();
  store.set_alpha(alpha);
  if (!print) return;
  std::printf("offload: alpha = %.4f (auto%s: measured %.2f GB/s and %.4f s of forward per layer; one layer moves "
              "%.2f MiB of x, %.2f MiB of whole tensors (o, statistics%s) and alpha x %.2f MiB of row tensors (%sy%s); "
              "time bound %.4f, host bound %.4f)\n",
              alpha, settings_.values == AlphaValues::memo ? " among MEMO's 0, 1/8, 1/4, 1/2, 1" : "",
              bandwidth_ / 1e9, layer_seconds_, bytes.x / kMiB, bytes.o / kMiB,
              shapes_.saved.local ? "" : "; the strategy's q, k, v, o", bytes.rest / kMiB,
              shapes_.saved.local ? "q, k, v, " : "",
              effective_chunks(shapes_.tokens, mlp_chunks_) == 1 ? " and the MLP's" : "", alpha_for_time(in),
              alpha_host_max_);
  std::fflush(stdout);
}

template <class T>
RunAttributes OffloadController<T>::attributes(const ActivationStore<T>& store) const {
  RunAttributes a;
  if (!active_) return a;
  a.text["offload_engine"] = store.engine() ? store.engine()->name() : "none";
  a.reals["offload_bandwidth_measured_gbs"] = bandwidth_ / 1e9;
  a.reals["offload_layer_forward_s"] = layer_seconds_;
  a.reals["offload_bandwidth_cap_gbs"] = bandwidth_cap_gbs_;
  a.reals["offload_host_budget_mib"] = settings_.budget_bytes / kMiB;
  const auto layer = ActivationStore<T>::layer_copy_bytes(shapes_, mlp_chunks_);
  a.reals["offload_layer_bytes_x"] = layer.x;
  a.reals["offload_layer_bytes_o"] = layer.o;
  a.reals["offload_layer_bytes_rest"] = layer.rest;
  if (policy_ == MemoryPolicy::offload) {
    a.reals["offload_alpha"] = store.alpha();
    a.text["offload_alpha_mode"] = settings_.alpha_auto ? "auto" : "deck";
    a.text["offload_alpha_values"] = name_of(settings_.values);
    a.integers["offload_host_rows"] = store.host_rows();
  }
  return a;
}

template double host_alpha_max<float>(MemoryPolicy, int, const ActivationShapes&, double, int);
template double host_alpha_max<double>(MemoryPolicy, int, const ActivationShapes&, double, int);
template double host_alpha_max<bf16>(MemoryPolicy, int, const ActivationShapes&, double, int);
template class OffloadController<float>;
template class OffloadController<double>;
template class OffloadController<bf16>;

}  // namespace minilst
