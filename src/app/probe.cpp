#include "app/probe.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <limits>
#include <map>
#include <vector>

#include <unistd.h>

#include "core/progress.hpp"
#include "app/training.hpp"
#include "core/kernel_choice.hpp"
#include "kernels/adamw.hpp"
#include "kernels/bf16.hpp"
#include "kernels/gemm.hpp"
#include "kernels/select.hpp"
#include "predict/flops.hpp"
#include "predict/machine_file.hpp"
#include "predict/prediction.hpp"
#include "parallel/mpi_communicator.hpp"
#include "io/deck.hpp"
#include "io/file_output.hpp"
#include "parallel/broadcast.hpp"
#include "job/node_resources.hpp"
#include "job/stop.hpp"
#include "results/provenance.hpp"

namespace minilst {

namespace {

// A figure is the median over `repeats` windows of back-to-back fenced calls, each window at
// least kWindowSeconds long (after one warm-up call), of the mean time of one call: what the
// kernel sustains under the machine's present load (a run's phases are means over steps, not
// best cases). A window, not a single call: where a node's ranks x threads exceed its cores
// (mpiexec --oversubscribe), the OS time-slices the ranks in slices of milliseconds, and a call
// shorter than a slice, timed alone, runs at a whole core's speed; a window spanning several
// slices measures the share of the cores the rank gets, as a run's phases (tens of ms) do.
// With a core per rank the window's mean is the single call's time.
constexpr double kWindowSeconds = 0.05;

// How a figure was timed, for its provenance.
std::string windows(int repeats) {
  return "the median of " + std::to_string(repeats) + " windows of back-to-back calls (>= 50 ms each)";
}

// The figures of several kernels, their windows taking turns (a, b, c, a, b, c, ...): a slow
// spell of the host then falls on one window of each rather than on every window of one, and
// their ratios (one head dim's rate over another's) hold. Each kernel's median window.
std::vector<double> median_seconds_each(int repeats, const std::vector<std::function<void()>>& fs) {
  for (const auto& f : fs) f();
  std::vector<std::vector<double>> t(fs.size());
  for (int r = 0; r < repeats; ++r)
    for (std::size_t i = 0; i < fs.size(); ++i) {
      ExecSpace().fence();
      Kokkos::Timer timer;
      int calls = 0;
      do {
        fs[i]();
        ExecSpace().fence();
        ++calls;
      } while (timer.seconds() < kWindowSeconds);
      t[i].push_back(timer.seconds() / calls);
    }
  std::vector<double> medians;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    medians.push_back(v[v.size() / 2]);
  }
  return medians;
}

template <class F>
double median_seconds(int repeats, F&& f) {
  return median_seconds_each(repeats, {std::function<void()>(f)})[0];
}

// C [m, n] = op_a(A) op_b(B) through the run's GEMM path (kernels::gemm_optimized): seconds, median.
template <class T>
double gemm_seconds(const KernelChoice& choice, int m, int n, int k, int repeats, kernels::Op op_a, kernels::Op op_b) {
  using kernels::Op;
  Mat<T> a("probe_a", op_a == Op::N ? m : k, op_a == Op::N ? k : m);
  Mat<T> b("probe_b", op_b == Op::N ? k : n, op_b == Op::N ? n : k), c("probe_c", m, n);
  Kokkos::deep_copy(a, T(0.01f));  // normal values (no denormal slow paths)
  Kokkos::deep_copy(b, T(0.02f));
  return median_seconds(repeats, [&] { kernels::gemm_optimized(choice, op_a, op_b, T(1), a, b, T(0), c); });
}

double mean_over(MPI_Comm comm, double v) {
  int n = 1;
  MPI_Comm_size(comm, &n);
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, comm);
  return v / n;
}

// The kernels a deck's `auto` gets for this precision (resolved here, per rank).
KernelChoice choice_for(Precision p, int head_dim) {
  KernelChoice request;
  request.attention = AttentionKernel::automatic;
  request.gemm_bf16 = GemmPath::automatic;
  request.gemm_fp32 = GemmPath::automatic;
  if (!kernel_choice_refusal(request, p, head_dim).empty()) return KernelChoice{};
  return resolve_kernel_choice(request, p, head_dim).choice;
}

// The GEMM shape classes around n (tokens x out x in); mlp: the intermediate 2.6875 n (688 at
// n = 256: Llama's 8/3 d rounded to a multiple of 16).
kernels::GemmShape class_shape(GemmClass c, int n) {
  const std::size_t a = std::size_t(n);
  switch (c) {
    case GemmClass::square: return {a, a, a};
    case GemmClass::projection: return {8 * a, a, a};
    case GemmClass::mlp: return {8 * a, std::size_t((43 * n / 16 + 15) / 16 * 16), a};
    case GemmClass::lm_head: break;
  }
  return {4 * a, 16 * a, a};
}

template <class T>
void probe_gemm(MachineFile& m, Precision prec, const KernelChoice& choice, const ProbeArgs& a, MPI_Comm comm) {
  const int n = sizeof(T) == 8 ? std::max(32, a.size / 2) : a.size;  // double: half the size (its rate is half)
  std::string shapes;
  using kernels::Op;
  for (const GemmClass cls : all_of<GemmClass>()) {
    const kernels::GemmShape g = class_shape(cls, n);
    const int gm = int(g.m), gn = int(g.n), gk = int(g.k);
    // as a training step runs each product: Y = X W (N N), dX = dY W^T (N T), dW = X^T dY (T N);
    // their FLOPs over their summed median times
    const double flops = 2.0 * gm * double(gn) * gk;
    const double seconds = gemm_seconds<T>(choice, gm, gn, gk, a.repeats, Op::N, Op::N) +
                           gemm_seconds<T>(choice, gm, gk, gn, a.repeats, Op::N, Op::T) +
                           gemm_seconds<T>(choice, gk, gn, gm, a.repeats, Op::T, Op::N);
    m.rates.gemm_gflops[prec][cls] = mean_over(comm, 3 * flops / seconds / 1e9);
    shapes += std::string(shapes.empty() ? "" : ", ") + name_of(cls) + " " + g.text();
  }
  m.provenance[machine_key_prefix(MachineKey::gemm_gflops, {int(prec), 0, 0}, 2)] =
      "measured: through " + describe(choice) + ", each class (tokens x out x in: " +
                                        shapes + ") as a step runs it: Y = X W, dX = dY W^T, dW = X^T dY, their FLOPs " +
                                        "over their summed medians (each " + windows(a.repeats) + ") after a warm-up; mean over ranks";
}

// pos(i) = i (a free function: nvcc takes no device lambda in a constructor)
void fill_positions(const Vec<std::int64_t>& pos) {
  Kokkos::parallel_for("probe_iota", Kokkos::RangePolicy<ExecSpace>(0, int(pos.extent(0))), KOKKOS_LAMBDA(const int i) { pos(i) = i; });
}

// Causal attention's operands at head dim h: S tokens, `heads` query heads over `kv_heads`.
template <class T>
struct AttentionOperands {
  int h;
  Mat<T> q, k, v, o, d_o, dq, dk, dv;
  Mat<accum_t<T>> lse, delta;
  Vec<std::int64_t> pos;
  AttentionOperands(int S, int heads, int kv_heads, int head_dim)
      : h(head_dim), q("probe_q", S, heads * h), k("probe_k", S, kv_heads * h), v("probe_v", S, kv_heads * h),
        o("probe_o", S, heads * h), d_o("probe_do", S, heads * h), dq("probe_dq", S, heads * h),
        dk("probe_dk", S, kv_heads * h), dv("probe_dv", S, kv_heads * h), lse("probe_lse", S, heads),
        delta("probe_delta", S, heads), pos("probe_pos", S) {
    fill_positions(pos);
    for (const auto* t : {&q, &k, &v, &d_o}) Kokkos::deep_copy(*t, T(0.01f));
  }
  void forward(const KernelChoice& choice) {
    const Vec<const std::int64_t> causal;  // every query sees from position 0
    kernels::attention_forward<T>(choice, o, lse, q, k, v, pos, causal, pos, h);
  }
  void backward(const KernelChoice& choice) {
    const Vec<const std::int64_t> causal;
    kernels::attention_backward<T>(choice, dq, dk, dv, delta, d_o, o, lse, q, k, v, pos, causal, pos, h);
  }
};

// The probe's head dim (--head-dim) and a second one (half of it, or twice one below 32), so that
// the file prices decks of other head dims (MachineRates::attention_padding).
int second_head_dim(int h) { return h >= 32 ? h / 2 : 2 * h; }

// Causal attention forward and backward at the probe's head dim and, where the same kernel runs
// it (a tensor-core kernel may refuse it), the second: 4 heads over 2 kv, the four kernels'
// windows taking turns (median_seconds_each), useful GFLOP/s.
template <class T>
void probe_attention(MachineFile& m, Precision prec, const KernelChoice& choice, const ProbeArgs& a, MPI_Comm comm) {
  const int S = sizeof(T) == 8 ? std::max(16, 2 * a.size) : 4 * a.size, heads = 4, kv_heads = 2, h = a.head_dim;
  const int h2 = second_head_dim(h);
  const bool second = attention_kernel_name(choice_for(prec, h2), prec) == attention_kernel_name(choice, prec);
  std::vector<AttentionOperands<T>> dims;
  dims.emplace_back(S, heads, kv_heads, h);
  if (second) dims.emplace_back(S, heads, kv_heads, h2);
  std::vector<std::function<void()>> calls;
  for (auto& d : dims) {
    calls.push_back([&] { d.forward(choice); });
    calls.push_back([&] { d.backward(choice); });
  }
  const int repeats = std::max(5, a.repeats);
  const std::vector<double> seconds = median_seconds_each(repeats, calls);
  const auto rate = [&](double flops, double s) { return mean_over(comm, flops / s / 1e9); };
  m.rates.attention_heads_per_kv = heads / kv_heads;
  m.rates.attention_head_dim = h;
  m.rates.attention_kernel[prec] = attention_kernel_name(choice, prec);
  m.rates.attention_gflops[prec][AttentionPass::forward] = rate(attention_flops_forward(S, heads * h), seconds[0]);
  m.rates.attention_gflops[prec][AttentionPass::backward] = rate(attention_flops_backward(S, heads * h), seconds[1]);
  const auto what = [&](int dim) {
    return "measured: causal attention forward and backward, " + attention_kernel_name(choice, prec) + ", S = " +
           std::to_string(S) + ", " + std::to_string(heads) + " heads (" + std::to_string(kv_heads) + " kv), head dim " +
           std::to_string(dim) + ", useful FLOPs (4 and 10 per causal pair and head dim), " + windows(repeats) +
           (second ? ", taking turns with the other head dim's" : "") + "; mean over ranks";
  };
  m.provenance[machine_key_prefix(MachineKey::attention_gflops, {int(prec), 0, 0}, 2)] = what(h);
  if (!second) return;
  m.rates.attention_second_head_dim = h2;
  m.rates.attention_second_gflops[prec][AttentionPass::forward] = rate(attention_flops_forward(S, heads * h2), seconds[2]);
  m.rates.attention_second_gflops[prec][AttentionPass::backward] = rate(attention_flops_backward(S, heads * h2), seconds[3]);
  m.provenance[machine_key_prefix(MachineKey::attention_second_gflops, {int(prec), 0, 0}, 2)] = what(h2);
}

// The elementwise bandwidth (rmsnorm forward: reads x, writes y) and the per-call overhead
// (the same kernel on one 16-wide row, fenced, median of 5 windows).
void probe_elementwise(MachineFile& m, const KernelChoice& choice, const ProbeArgs& a, MPI_Comm comm) {
  const int rows = 8 * a.size, d = 1024;
  Mat<float> x("probe_x", rows, d), y("probe_y", rows, d);
  Vec<float> w("probe_w", d);
  Kokkos::deep_copy(x, 0.5f);
  Kokkos::deep_copy(w, 1.0f);
  const double s = median_seconds(std::max(5, a.repeats), [&] { kernels::rmsnorm_forward<float>(choice, y, x, w, 1e-5); });
  const double bytes = 2.0 * rows * d * sizeof(float);
  m.rates.elementwise_gbs = mean_over(comm, bytes / s / 1e9);
  Mat<float> x1("probe_x1", 1, 16), y1("probe_y1", 1, 16);
  const auto w1 = Kokkos::subview(w, Kokkos::make_pair(0, 16));
  const double t1 = median_seconds(5, [&] { kernels::rmsnorm_forward<float>(choice, y1, x1, w1, 1e-5); });
  m.rates.op_overhead_us = mean_over(comm, t1 * 1e6);
  m.provenance[machine_key_text(MachineKey::elementwise_gbs)] = "measured: rmsnorm forward (fp32) on [" + std::to_string(rows) + ", " +
                                    std::to_string(d) + "], bytes read + written, " + windows(std::max(5, a.repeats)) +
                                    "; mean over ranks";
  // AdamW over fp32 states (kernels/adamw.hpp): reads p, g, m, v, writes p, m, v: 28 bytes an element
  const std::int64_t n = std::int64_t(16) * 1024 * a.size;  // 4M elements at --size 256
  Vec<float> p("probe_p", n), g("probe_g", n), mo("probe_m", n), v("probe_v", n);
  Kokkos::deep_copy(p, 0.5f);
  Kokkos::deep_copy(g, 0.01f);
  const kernels::AdamWHyper hp{};
  long step = 0;
  const double t_adam = median_seconds(std::max(3, a.repeats), [&] {
    kernels::adamw_update_on(ExecSpace(), p, Vec<const float>(g), mo, v, ++step, hp, Vec<float>());
  });
  m.rates.optimizer_gbs = mean_over(comm, 28.0 * double(n) / t_adam / 1e9);
  m.provenance[machine_key_text(MachineKey::optimizer_gbs)] = "measured: AdamW (kernels/adamw.hpp) over " + std::to_string(n) +
                                  " fp32 elements, 28 bytes an element, " + windows(std::max(3, a.repeats)) +
                                  "; mean over ranks";
  m.provenance[machine_key_text(MachineKey::op_overhead_us)] = "measured: the same kernel on one row of 16, fenced, " + windows(5) + "; mean over ranks";
}

// A barrier the waiting ranks sleep in (MPI_Barrier may spin and take a core from the rank at work).
void idle_barrier(MPI_Comm comm) {
  MPI_Request request;
  MPI_Ibarrier(comm, &request);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    timespec pause{0, 2000000};  // 2 ms
    nanosleep(&pause, nullptr);
  }
}

// The calibration step (step_scale): a small training step (2 layers, hidden 256 or the head
// dim's multiple, 2 query heads per kv head, the attention probe's S) through the run's own
// code (train_step), each rank its own one-rank problem, each phase family's time over the
// same family priced from the rates measured above (time_model.hpp). What the isolated figures
// miss (operands coming from other kernels rather than a warm cache, dispatch, the small kernels
// between the timed ones, ranks that share cores unevenly) is then in the file.
//
// The step is timed in kCalibrationRounds rounds of kCalibrationSteps steps, each round a fresh
// model and one warm-up step. The precisions' rounds take turns (float, bf16, double, float, ...),
// and on a node of two or more ranks each busy round (every rank at work, each step started
// together, each step's time the slowest rank's: a run's ranks meet at every exchange) is
// followed by the same round on rank 0 alone (step_scale_alone: a run of fewer ranks than the
// node holds shares less and goes faster, MachineRates::at_busy_ranks). So the calibration of
// each precision spans the whole calibration's time, and a slow spell of the host (a VM's
// neighbours, invisible to the guest) falls on one round of each rather than on every round of
// one; each family's figure is the median over the timed steps.
constexpr int kCalibrationSteps = 2, kCalibrationRounds = 5;
using FamilySeconds = EnumMap<PhaseFamily, double>;

// One round: a fresh model of `deck`, one warm-up step (it also plans the step's memory), then
// kCalibrationSteps timed steps, each started together by the ranks of `lockstep` (MPI_COMM_NULL:
// none). Each timed step's seconds per phase family.
template <class T>
std::vector<FamilySeconds> calibration_round(const Deck& deck, const KernelChoice& choice, MPI_Comm lockstep) {
  struct ArenaReset {  // the arena is the process's: released before Kokkos is finalized
    ~ArenaReset() { StepArena::instance().reset(); }
  } arena_reset;
  StepArena::instance().configure(deck.memory.plan, deck.memory.solver);
  PhaseTimers timers;
  Training<T> t(deck, MPI_COMM_SELF, choice, 0.0, timers);
  long step = 0;
  timers.clear();
  train_step(t, deck, step++, timers, MPI_COMM_SELF, false, [](StepResult&) {});  // the warm-up
  std::vector<FamilySeconds> steps;
  for (int i = 0; i < kCalibrationSteps; ++i, ++step) {
    if (lockstep != MPI_COMM_NULL) idle_barrier(lockstep);
    timers.clear();
    train_step(t, deck, step, timers, MPI_COMM_SELF, false, [](StepResult&) {});
    PhaseSeconds phases{};
    for (const Phase ph : all_of<Phase>()) phases[ph] = timers.get(ph);
    steps.push_back(family_seconds(phases));
  }
  return steps;
}

// One precision's calibration: its deck and kernels, its families priced from the rates measured
// so far, and its timed steps (busy: every rank at work; alone: rank 0 while the others idle).
struct Calibration {
  Precision prec;
  KernelChoice choice;
  Deck deck;
  FamilySeconds predicted{};
  std::vector<FamilySeconds> busy, alone;
  std::string step_text;  // the step in words, for the provenance

  std::vector<FamilySeconds> round(MPI_Comm lockstep) const {
    switch (prec) {
      case Precision::float32: return calibration_round<float>(deck, choice, lockstep);
      case Precision::bf16: return calibration_round<bf16>(deck, choice, lockstep);
      case Precision::float64: return calibration_round<double>(deck, choice, lockstep);
    }
    throw std::logic_error("calibration: unknown precision");
  }
};

Calibration calibration_of(const MachineFile& m, Precision prec, const KernelChoice& choice, const ProbeArgs& a) {
  const int h = a.head_dim, heads = std::max(4, 2 * ((128 + h - 1) / h)), hidden = heads * h;
  const int S = prec == Precision::float64 ? std::max(64, 2 * a.size) : 4 * a.size;
  const auto n = [](long v) { return std::to_string(v); };
  const int steps = 1 + kCalibrationSteps;
  Calibration c{prec, choice,
                built_in_deck({"model.hidden=" + n(hidden), "model.layers=2", "model.heads=" + n(heads),
                               "model.kv_heads=" + n(heads / 2), "model.intermediate=" + n((43 * hidden / 16 + 15) / 16 * 16),
                               "model.vocab=4096", "run.seq_len=" + n(S), "run.steps=" + n(steps),
                               "run.warmup_steps=1", "run.precision=" + name_of(prec)})};
  MachineRates raw = m.rates;
  raw.step_scale[prec] = {};
  std::string error;
  const DeckPlan plan = plan_deck(c.deck, c.deck.run.seq_len, {1, false, false}, error);
  if (!error.empty()) throw std::runtime_error("calibration step: " + error);
  c.predicted = family_seconds(price_plan(c.deck, plan, raw).phases);
  c.step_text = "a training step (2 layers, hidden " + n(hidden) + ", " + n(heads) + " heads, " + n(heads / 2) +
                " kv, S = " + n(S) + ", vocab 4096, " + name_of(prec) + ")";
  return c;
}

// Each step's time per family, the slowest rank's (a run's ranks meet at every exchange, so a
// step goes at the slowest one's pace).
void keep_slowest_rank(std::vector<FamilySeconds>& steps, MPI_Comm comm) {
  std::vector<double> flat;
  for (const auto& s : steps) flat.insert(flat.end(), s.values.begin(), s.values.end());
  MPI_Allreduce(MPI_IN_PLACE, flat.data(), int(flat.size()), MPI_DOUBLE, MPI_MAX, comm);
  auto it = flat.begin();
  for (auto& s : steps)
    for (auto& v : s.values) v = *it++;
}

// Per family: the median over the timed steps over the same family priced from the rates.
FamilySeconds step_scale_of(const Calibration& c, const std::vector<FamilySeconds>& steps) {
  FamilySeconds scale{};
  for (const PhaseFamily family : all_of<PhaseFamily>()) {
    std::vector<double> v;
    for (const auto& s : steps) v.push_back(s[family]);
    std::sort(v.begin(), v.end());
    const double median = (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
    scale[family] = median / std::max(c.predicted[family], 1e-12);
  }
  return scale;
}

void record_calibration(MachineFile& m, const Calibration& c, bool alone, MPI_Comm comm) {
  const auto n = [](long v) { return std::to_string(v); };
  const std::string how = n(kCalibrationRounds) + " rounds of " + n(kCalibrationSteps) +
                          " steps (each after a fresh model and one warm-up step), taking turns with the other "
                          "precisions' rounds" + (alone ? " and the one-rank rounds" : "") +
                          "; each phase family's median over the timed steps over the same family priced from this "
                          "file's rates";
  m.rates.step_scale[c.prec] = step_scale_of(c, c.busy);
  m.provenance[machine_key_prefix(MachineKey::step_scale, {int(c.prec), 0, 0}, 2)] =
      "measured: " + c.step_text + " on every rank at once, the ranks starting each step together and each step's time " +
      "the slowest rank's, " + how;
  if (!alone) return;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  FamilySeconds scale = rank == 0 ? step_scale_of(c, c.alone) : FamilySeconds{};
  MPI_Bcast(scale.values.data(), int(scale.values.size()), MPI_DOUBLE, 0, comm);
  m.rates.step_scale_alone[c.prec] = scale;
  m.provenance[machine_key_prefix(MachineKey::step_scale_alone, {int(c.prec), 0, 0}, 2)] =
      "measured: " + c.step_text + " on rank 0 while the other ranks idle, " + how;
}

// Every precision's calibration, the rounds taking turns (see the top of this part).
void calibrate_steps(MachineFile& m, const std::vector<std::pair<Precision, KernelChoice>>& kinds, const ProbeArgs& a,
                     MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const bool alone = m.rates.ranks_per_node >= 2;
  std::vector<Calibration> calibrations;
  for (const auto& [prec, choice] : kinds) calibrations.push_back(calibration_of(m, prec, choice, a));
  for (int round = 0; round < kCalibrationRounds; ++round)
    for (auto& c : calibrations) {
      auto steps = c.round(comm);
      keep_slowest_rank(steps, comm);
      c.busy.insert(c.busy.end(), steps.begin(), steps.end());
      if (!alone) continue;
      if (rank == 0) {
        const auto solo = c.round(MPI_COMM_NULL);
        c.alone.insert(c.alone.end(), solo.begin(), solo.end());
      }
      idle_barrier(comm);
    }
  for (const auto& c : calibrations) record_calibration(m, c, alone, comm);
}

// The copy engine's link: device <-> host (a host build: one memory, memcpy between two allocations).
void probe_host_link(MachineFile& m, const ProbeArgs& a, MPI_Comm comm) {
  const std::size_t n = std::size_t(16) * a.size * 1024;  // floats: 16 MiB at --size 256
  Kokkos::View<float*, ExecSpace::memory_space> dev("probe_dev", n);
  Kokkos::View<float*, Kokkos::HostSpace> host("probe_host", n);
  Kokkos::deep_copy(dev, 1.0f);
  const double down = median_seconds(a.repeats, [&] { Kokkos::deep_copy(host, dev); });
  const double up = median_seconds(a.repeats, [&] { Kokkos::deep_copy(dev, host); });
  const double bytes = double(n) * sizeof(float);
  m.rates.host_link_gbs = mean_over(comm, bytes / std::max(down, up) / 1e9);
#ifdef KOKKOS_ENABLE_CUDA
  m.rates.host_same_memory = false;
  m.provenance[machine_key_prefix(MachineKey::host_link_gbs, {}, 1)] = "measured: Kokkos::deep_copy device <-> pageable host memory of " +
                              std::to_string(bytes / 1048576.0) + " MiB, the slower direction, " +
                              windows(a.repeats) + "; mean over ranks";
#else
  m.rates.host_same_memory = true;
  m.provenance[machine_key_prefix(MachineKey::host_link_gbs, {}, 1)] = "host: same memory; measured: memcpy (Kokkos::deep_copy) between two host allocations of " +
                              std::to_string(long(bytes / 1048576.0)) + " MiB, " + windows(a.repeats) +
                              "; mean over ranks";
#endif
}

// Busy arithmetic for `seconds` of this thread's CPU time (not wall time: a rank the OS pauses
// computes on when it resumes).
void cpu_work(double seconds) {
  const auto cpu_now = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  };
  const double end = cpu_now() + seconds;
  volatile double x = 1.0;
  while (cpu_now() < end)
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
}
constexpr double kSyncWorkSeconds = 0.002;  // about a kernel's worth of work between a run's exchanges
constexpr int kSyncRounds = 30;

// The five collectives over `comm` (all its ranks): latency from a message of one element
// per block, bandwidth from --comm-mib per rank: bytes as comm_model counts them over the
// large call's time less the small call's. Timed as the slowest rank's, the median of --repeats.
// sync_us: the wait of a call that follows compute. Each rank computes kSyncWorkSeconds of its
// own CPU time (the OS may pause it in between: the wall time is then longer), then makes the
// one-element call; the mean time in the call over kSyncRounds, less the latency, mean over
// ranks. Ranks with a core each arrive together (about 0); ranks sharing cores wait for a peer
// the scheduler has paused (about a time slice), as a run's exchanges between kernels do.
// One collective the probe times: a call moving n floats per rank in total (n a multiple of P),
// and its bytes as comm_model counts them.
struct LinkCall {
  LinkOp op;
  std::function<void(std::size_t)> call;
  std::function<double(std::size_t)> counted;
};

// The five collectives over `comm`, on the buffers send and recv.
std::vector<LinkCall> link_calls(MpiCommunicator& comm, std::vector<float>& send, std::vector<float>& recv) {
  const int P = comm.size(), peer = comm.rank() ^ 1;  // pairs exchange both ways at once, as ring hops do (an odd last rank idles)
  const auto others = [P](std::size_t n) { return double(n / P) * (P - 1) * 4; };
  const auto payload = [](std::size_t n) { return double(n) * 4; };
  return {
      {LinkOp::p2p,
       [&comm, &send, &recv, P, peer](std::size_t n) {
         if (peer >= P) return;
         auto rq = comm.irecv(recv.data(), n, DType::f32, peer, 7);
         auto sq = comm.isend(send.data(), n, DType::f32, peer, 7, CommOp::probe);
         comm.launch(7);
         comm.wait(sq);
         comm.wait(rq);
       },
       payload},
      {LinkOp::alltoall,
       [&comm, &send, &recv, P](std::size_t n) {
         const std::vector<std::int64_t> counts(P, std::int64_t(n / P));
         std::vector<std::int64_t> displs(P);
         for (int p = 0; p < P; ++p) displs[p] = p * counts[p];
         comm.alltoallv(send.data(), counts, displs, recv.data(), counts, displs, DType::f32, CommOp::probe);
       },
       others},
      {LinkOp::allreduce, [&comm, &recv](std::size_t n) { comm.allreduce_sum(recv.data(), n, DType::f32, CommOp::probe); },
       payload},
      {LinkOp::allgather,
       [&comm, &send, &recv, P](std::size_t n) {
         auto rq = comm.iallgather(send.data(), recv.data(), n / P, DType::f32, CommOp::probe);
         comm.wait(rq);
       },
       others},
      {LinkOp::reduce_scatter,
       [&comm, &send, &recv, P](std::size_t n) {
         auto rq = comm.ireduce_scatter_sum(send.data(), recv.data(), n / P, DType::f32, CommOp::probe);
         comm.wait(rq);
       },
       others},
  };
}

// The five collectives over `comm` (all its ranks): latency from a message of one element
// per block, bandwidth from --comm-mib per rank: bytes as comm_model counts them over the
// large call's time less the small call's. Timed as the slowest rank's, the median of --repeats.
// sync_us: the wait of a call that follows compute. Each rank computes kSyncWorkSeconds of its
// own CPU time (the OS may pause it in between: the wall time is then longer), then makes the
// one-element call; the mean time in the call over kSyncRounds, less the latency, mean over
// ranks. Ranks with a core each arrive together (about 0); ranks sharing cores wait for a peer
// the scheduler has paused (about a time slice), as a run's exchanges between kernels do.
void probe_links(MachineFile& m, LinkScope scope, MPI_Comm mpi, const ProbeArgs& a) {
  MpiCommunicator comm(mpi);
  const int P = comm.size();
  const std::size_t big = std::max<std::size_t>(P, std::size_t(a.comm_mib * 1048576.0 / 4) / P * P);  // floats
  std::vector<float> send(big, 1.0f), recv(big, 0.0f);
  const auto timed = [&](auto&& call) {  // the median of the slowest rank's times, after a warm-up
    std::vector<double> times;
    for (int r = 0; r <= a.repeats; ++r) {
      MPI_Barrier(mpi);
      const double t0 = MPI_Wtime();
      call();
      double t = MPI_Wtime() - t0;
      MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, mpi);
      if (r > 0) times.push_back(t);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  };
  const auto ops = link_calls(comm, send, recv);
  for (const LinkCall& op : ops) {
    const double small = timed([&] { op.call(std::size_t(P)); });
    const double large = timed([&] { op.call(big); });
    LinkRate l;
    l.latency_us = small * 1e6;
    l.gbs = op.counted(big) / std::max(large - small, large * 1e-3) / 1e9;
    MPI_Barrier(mpi);
    double waited = 0;
    for (int r = 0; r < kSyncRounds; ++r) {
      cpu_work(kSyncWorkSeconds);
      const double t0 = MPI_Wtime();
      op.call(std::size_t(P));
      waited += MPI_Wtime() - t0;
    }
    l.sync_us = std::max(0.0, mean_over(mpi, waited / kSyncRounds * 1e6) - l.latency_us);
    m.rates.links[scope][op.op] = l;
  }
  char text[600];
  std::snprintf(text, sizeof text,
                "measured: %d ranks through the MPI communicator (host buffers), latency: one float per block; "
                "bandwidth: %.3g MiB per rank, bytes as comm_model counts them over (large - small) time; slowest "
                "rank, median of %d; sync_us: the mean time of the one-float call after %.0f ms of each rank's own "
                "CPU work, less the latency, over %d rounds, mean over ranks", P, a.comm_mib, a.repeats,
                kSyncWorkSeconds * 1e3, kSyncRounds);
  m.provenance[machine_key_prefix(MachineKey::link_gbs, {int(scope), 0, 0}, 2)] = text;
}

}  // namespace

std::string probe_args_problem(const ProbeArgs& a) {
  if (a.size < 16 || a.size > 16384 || a.repeats < 1 || a.comm_mib <= 0 || a.head_dim < 2 || a.head_dim > 256 ||
      a.head_dim % 2 != 0)
    return "--size must be in [16, 16384], --repeats >= 1, --comm-mib > 0, --head-dim even in [2, 256] (as a deck's: "
           "RoPE rotates pairs)";
  return "";
}

// The job's ranks per node (the largest node's) and, with several ranks, its links: between
// nodes and within one, or within the one node.
void probe_job_links(MachineFile& m, MPI_Comm world, const ProbeArgs& a, int P,
                     const std::map<std::string, std::string>& prov) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  const auto get = [&](const char* k) { const auto it = prov.find(k); return it == prov.end() ? std::string("unknown") : it->second; };
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int node_size = 1;
  MPI_Comm_size(node, &node_size);
  MPI_Allreduce(MPI_IN_PLACE, &node_size, 1, MPI_INT, MPI_MAX, world);
  m.rates.ranks_per_node = node_size;

  if (P > 1) {
    int hosts = 1;
    try {
      hosts = std::stoi(get("numhosts"));
    } catch (...) {
    }
    if (hosts > 1) {
      probe_links(m, LinkScope::inter_node, world, a);
      int nsize = 1;
      MPI_Comm_size(node, &nsize);
      // every node's ranks at once (the smallest node decides whether there is a pair)
      int smallest = nsize;
      MPI_Allreduce(MPI_IN_PLACE, &smallest, 1, MPI_INT, MPI_MIN, world);
      if (smallest > 1) probe_links(m, LinkScope::intra_node, node, a);
    } else {
      probe_links(m, LinkScope::intra_node, world, a);
    }
  }
  MPI_Comm_free(&node);
}

// Rank 0's progress lines: each part of the probe as it ends, with its time and the total.
struct ProbeProgress {
  bool print;
  Kokkos::Timer total{}, part{};
  void done(const char* what) {
    progress_stage(std::string(what) + " measured; the next part");
    if (print) std::printf("probe: %s measured in %.1f s (%.1f s in all)\n", what, part.seconds(), total.seconds());
    std::fflush(stdout);
    part.reset();
  }
};

MachineFile measure_machine(const ProbeArgs& a, MPI_Comm world, bool stop_on_slow_link, std::vector<std::string>& slow) {
  int rank = 0, P = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &P);
  ProbeProgress progress{rank == 0};
  const auto prov = collect_provenance(world, 0, nullptr);
  MachineFile m;
  m.kind = "measured";
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  m.rates.name = a.name.empty() ? std::string(host) : a.name;
  const auto get = [&](const char* k) { const auto it = prov.find(k); return it == prov.end() ? std::string("unknown") : it->second; };
  m.description = get("cpu_model") + ", " + std::to_string(P) + " rank(s) on " + get("numhosts") + " host(s), " +
                  version_string() + ", Kokkos " + get("kokkos_devices");
  m.source = "measured by `" + a.command_line + "` on " + get("hostlist") + " at " + utc_time(false);
  probe_job_links(m, world, a, P, prov);
  if (P > 1) progress.done("links");
  // A link below the floor can end the probe before the (longer) compute measurements.
  m.link_floor_gbs = a.link_floor_gbs > 0 ? a.link_floor_gbs : kDefaultLinkFloorGBs;
  slow = implausible_figures(m, {}, m.link_floor_gbs);
  if (stop_on_slow_link && !slow.empty()) return m;
  const KernelChoice f32 = choice_for(Precision::float32, a.head_dim), b16 = choice_for(Precision::bf16, a.head_dim),
                     f64 = choice_for(Precision::float64, a.head_dim);
  progress.done("kernel choice");
  MPI_Barrier(world);  // the ranks measure together, as a run's ranks compute together
  probe_gemm<float>(m, Precision::float32, f32, a, world);
  probe_gemm<bf16>(m, Precision::bf16, b16, a, world);
  probe_gemm<double>(m, Precision::float64, f64, a, world);
  progress.done("GEMM rates");
  probe_attention<float>(m, Precision::float32, f32, a, world);
  probe_attention<bf16>(m, Precision::bf16, b16, a, world);
  probe_attention<double>(m, Precision::float64, f64, a, world);
  progress.done("attention rates");
  probe_elementwise(m, f32, a, world);
  probe_host_link(m, a, world);
  progress.done("bandwidths and call overhead");
  MPI_Barrier(world);
  calibrate_steps(m, {{Precision::float32, f32}, {Precision::bf16, b16}, {Precision::float64, f64}}, a, world);
  progress.done("calibration steps");

  // Plausibility: the ISA's nominal per core x the rank's threads (or a GPU's floor).
  std::string isa;
  const ThreadCounts threads = thread_counts();
  for (const Precision prec : all_of<Precision>())
    m.nominal_gemm[prec] = isa_nominal_gflops(prec, isa) *
#ifdef KOKKOS_ENABLE_CUDA
                           1;
#else
                           std::max(1, std::max(threads.kokkos, threads.blas));
#endif
  m.provenance[machine_key_prefix(MachineKey::nominal_gemm_gflops, {}, 1)] = "the ISA floor (" + isa + ", predict/machine_file.hpp) x the rank's threads; links: the floor " +
                            "given by --link-floor-gbs (default 0.1 GB/s)";
  return m;
}

// The probe's largest working set per rank, bytes: the LM-head class's three matrices in float
// (4n x n, n x 16n, 4n x 16n; bf16 and double are smaller), the collectives' two buffers, and the
// calibration step's logits (4n tokens x 4096), with room for the rest.
double probe_bytes(const ProbeArgs& a) {
  const double n = a.size;
  return 1.5 * (84.0 * n * n * 4 + 2.0 * a.comm_mib * 1048576.0 + 4 * n * 4096 * 8);
}

// Rank 0: the output may be written (io/file_output.hpp: a new name, or an earlier machine file
// this process may replace; locked while the probe measures) and the probe fits the memory the
// ranks have; "" or why not.
std::string probe_refusal(const ProbeArgs& a, FileOutput& out, const AvailableMemory& available) {
  if (available.host > 0 && probe_bytes(a) > available.host)
    return "--size " + std::to_string(a.size) + " and --comm-mib " + std::to_string(long(a.comm_mib)) + " need about " +
           std::to_string(long(probe_bytes(a) / 1048576)) + " MiB per rank; this node has " +
           std::to_string(long(available.host / 1048576)) + " MiB available per rank: probe smaller";
  return out.claim(a.out, "--out", [](const std::string& text) {
    return text.find(std::string("schema: ") + kMachineSchema) != std::string::npos;
  });
}

int run_probe(const ProbeArgs& a, MPI_Comm world) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  if (const auto problem = probe_args_problem(a); !problem.empty()) {
    if (rank == 0) std::fprintf(stderr, "error: probe: %s\n", problem.c_str());
    return 2;
  }
  FileOutput out;  // before any measuring: the name is this probe's, or the probe does not start
  const AvailableMemory available = available_memory(world);
  std::string refused = rank == 0 ? probe_refusal(a, out, available) : "";
  if (rank == 0 && refused.empty()) remove_when_stopped(out.lock_path());  // a signal ends the probe: its lock goes
  refused = broadcast_string(refused, world);
  if (!refused.empty()) {
    if (rank == 0) std::fprintf(stderr, "error: probe: %s\n", refused.c_str());
    return 2;
  }
  std::vector<std::string> slow;
  MachineFile m = measure_machine(a, world, !a.allow_implausible, slow);
  const auto refuse = [&](const std::vector<std::string>& bad) {
    if (rank != 0) return 3;
    for (const auto& b : bad) std::fprintf(stderr, "error: probe: implausible: %s\n", b.c_str());
    std::fprintf(stderr, "error: probe: %zu implausible figure(s); nothing written (--allow-implausible writes them, "
                 "flagged under `implausible:`)\n", bad.size());
    return 3;
  };
  if (!a.allow_implausible && !slow.empty()) return refuse(slow);
  const auto bad = implausible_figures(m, {}, m.link_floor_gbs);
  if (!bad.empty() && !a.allow_implausible) return refuse(bad);
  if (rank != 0) return 0;
  for (const auto& b : bad) std::fprintf(stderr, "warning: probe: implausible: %s\n", b.c_str());
  m.implausible = bad;
  if (const auto missing = missing_machine_keys(m); !missing.empty()) {  // the key table's required keys
    std::fprintf(stderr, "error: probe: the measured file is incomplete: %s\n", missing.c_str());
    return 1;
  }
  try {
    const StopSignalsHeld held;  // a signal now ends the probe after the write, not in it
    out.write(machine_yaml(m));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: probe: %s\n", e.what());
    return 1;
  }
  std::printf("probe: wrote %s (%s)\n", a.out.c_str(), m.description.c_str());
  std::printf("%s", machine_yaml(m).c_str());
  return 0;
}

}  // namespace minilst
