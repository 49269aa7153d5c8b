#include "app/driver.hpp"
#include "app/stop.hpp"

#include <unistd.h>
#include <Kokkos_Core.hpp>
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>

#include "app/plan.hpp"
#include "io/h5.hpp"
#include "io/metrics.hpp"
#include "io/provenance.hpp"
#include "io/tensor_dump.hpp"
#include "memory/offload_alpha.hpp"
#include "memory/step_arena.hpp"
#include "model/flops.hpp"
#include "model/memory_model.hpp"
#include "model/trainer.hpp"
#include "parallel/comm_model.hpp"
#include "parallel/parallel_setup.hpp"
#include "parallel/step_reduce.hpp"

namespace minilst {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Host memory for offloaded activations, per rank: the deck's, or (auto) 3/4 of
// the node's physical memory shared by the ranks on the node. The smallest over
// ranks, so every rank decides alike.
double host_budget_bytes(const Deck& deck, MPI_Comm comm) {
  double budget = deck.memory.host_budget_mib * kMiB;
  if (deck.memory.host_budget_auto) {
    MPI_Comm node;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int local_ranks = 1;
    MPI_Comm_size(node, &local_ranks);
    MPI_Comm_free(&node);
    budget = 0.75 * double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)) / local_ranks;
  }
  MPI_Allreduce(MPI_IN_PLACE, &budget, 1, MPI_DOUBLE, MPI_MIN, comm);
  return budget;
}

// Memory this rank may use, the smallest over ranks: host memory is what the node
// has available (MemAvailable, within a cgroup's limit) shared by its ranks; on
// CUDA builds the device's is the free memory of the rank's GPU.
struct AvailableMemory {
  double host = 0, device = 0;  // bytes; 0 = unknown
};

double meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024.0;
  return 0;
}

double cgroup_available() {  // cgroup v2: memory.max - memory.current; 0 when unlimited or unknown
  std::ifstream max_in("/sys/fs/cgroup/memory.max"), cur_in("/sys/fs/cgroup/memory.current");
  std::string max_text;
  double current = 0;
  if (!(max_in >> max_text) || max_text == "max" || !(cur_in >> current)) return 0;
  return std::max(0.0, std::strtod(max_text.c_str(), nullptr) - current);
}

AvailableMemory available_memory(MPI_Comm comm) {
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local_ranks = 1;
  MPI_Comm_size(node, &local_ranks);
  MPI_Comm_free(&node);
  AvailableMemory a;
  double host = meminfo_available();
  if (const double cg = cgroup_available(); cg > 0 && (host == 0 || cg < host)) host = cg;
  a.host = host / local_ranks;
#ifdef KOKKOS_ENABLE_CUDA
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) a.device = double(free_b);
#endif
  double v[2] = {a.host > 0 ? a.host : HUGE_VAL, a.device > 0 ? a.device : HUGE_VAL};
  MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MIN, comm);
  a.host = v[0] == HUGE_VAL ? 0 : v[0];
  a.device = v[1] == HUGE_VAL ? 0 : v[1];
  return a;
}

// Before anything is allocated: the memory model's prediction for the busiest rank
// against what the ranks have (collective; the same verdict on every rank). A
// lower bound (weights, gradients, AdamW moments and one [S_local, d] activation)
// is checked first, so that impossible sizes are refused without modelling them.
std::string check_memory(const Deck& deck, const RunContext& ctx) {
  const auto avail = available_memory(ctx.comm);
  const double T = deck.run.precision == "double" ? 8 : 4;
  const double local_tokens = std::ceil(double(deck.run.seq_len) / deck.parallel.sequence_parallel());
  const double host_inputs = 2.0 * 8.0 * double(deck.run.grad_accum) * double(deck.run.seq_len);  // tokens, labels
  const auto refuse = [&](double need, double have, const char* what) {
    char msg[512];
    std::snprintf(msg, sizeof msg,
                  "the run needs %.1f MiB of %s per rank (memory model) but %.1f MiB are available per rank: "
                  "lower run.seq_len, use memory.policy checkpoint or offload, or more ranks "
                  "(`minilst plan DECK --max-seq-len --device-mib N` finds what fits)",
                  need / kMiB, what, have / kMiB);
    return std::string(msg);
  };
  const bool cuda = avail.device > 0;
  const double budget = cuda ? avail.device : avail.host;
  const double lower = 4 * T * double(parameter_count(deck.model)) + T * local_tokens * deck.model.hidden;
  if (budget > 0 && lower > budget) return refuse(lower, budget, cuda ? "device memory" : "memory");
  PlanArgs args;
  args.ranks = ctx.nranks;
  args.arena = false;
  std::string error;
  const Plan p = plan_deck(deck, deck.run.seq_len, args, error);
  if (!error.empty()) return error;
  const double device = double(p.memory.at("device_total")), host = double(p.memory.at("host_offload")) + host_inputs;
  if (cuda) {
    if (device > avail.device) return refuse(device, avail.device, "device memory");
    if (avail.host > 0 && host > avail.host) return refuse(host, avail.host, "host memory");
  } else if (avail.host > 0 && device + host > avail.host) {
    return refuse(device + host, avail.host, "memory (device and host are one here)");
  }
  return "";
}

// What the offload policies decided before the first step and measured in it.
struct OffloadRun {
  bool on = false;               // checkpoint_offload or offload
  bool alpha_auto = false;
  double budget = 0;             // host bytes per rank
  double alpha_host_max = 1;     // the budget's bound on alpha
  double alpha_max_used = 0;     // the largest alpha of the run (sizes the host buffers)
  double bandwidth = 0;          // measured in the first step, bytes/s
  double layer_seconds = 0;      // measured in the first step
};

// Checks the host budget against the analytic footprint and, for offload with
// alpha auto, starts at the largest alpha the budget allows. Returns an error
// message (the same on every rank) or "".
template <class T>
std::string plan_offload(const Deck& deck, const ModelConfig& cfg, ModelOptions& opts, std::int64_t S_local,
                         MPI_Comm comm, OffloadRun& run) {
  run.on = uses_host_memory(opts.policy);
  if (!run.on) return "";
  long long S = S_local;  // the busiest rank decides
  MPI_Allreduce(MPI_IN_PLACE, &S, 1, MPI_LONG_LONG, MPI_MAX, comm);
  run.budget = host_budget_bytes(deck, comm);
  run.alpha_auto = opts.policy == MemoryPolicy::offload && deck.memory.alpha_auto;
  run.alpha_host_max = host_alpha_max(cfg, opts.policy, S, sizeof(T), sizeof(accum_t<T>), run.budget);
  const auto mib = [](double b) {
    char text[48];
    std::snprintf(text, sizeof text, "%.2f MiB", b / kMiB);
    return std::string(text);
  };
  const auto needs = [&](double alpha) {
    return mib(double(predict_host_offload(cfg, opts.policy, alpha, S, sizeof(T), sizeof(accum_t<T>))));
  };
  const std::string budget = "memory.host_budget_mib allows " + mib(run.budget) + " per rank" +
                             (deck.memory.host_budget_auto ? " (auto: 3/4 of the node's memory / its ranks)" : "");
  if (run.alpha_host_max < 0)
    return "memory.policy " + to_string(opts.policy) + " needs " + needs(0.0) + " of host memory per rank" +
           (opts.policy == MemoryPolicy::offload ? " even at memory.offload_alpha = 0" : "") + ", but " + budget;
  if (opts.policy == MemoryPolicy::offload) {
    if (run.alpha_auto) {
      opts.offload.alpha = std::min(1.0, run.alpha_host_max);  // the warm-up step measures at the largest alpha
    } else if (opts.offload.alpha > run.alpha_host_max) {
      char alpha[64];
      std::snprintf(alpha, sizeof alpha, "%g", opts.offload.alpha);
      char largest[32];
      std::snprintf(largest, sizeof largest, "%.4f", run.alpha_host_max);
      return std::string("memory.offload_alpha = ") + alpha + " needs " + needs(opts.offload.alpha) +
             " of host memory per rank, but " + budget + " (the largest alpha that fits: " + largest + ")";
    }
  }
  run.alpha_max_used = opts.policy == MemoryPolicy::offload ? opts.offload.alpha : 0.0;
  return "";
}

std::string prepare_output_file(const std::string& key, const std::string& path) {
  const auto problem = h5::prepare_output(path);
  return problem.empty() ? "" : key + ": " + problem;
}

// "auto": minilst_<UTC time>_<Slurm job id>[_<array task>]_<pid>.h5, unique for
// runs started in the same second (the process id), in the same job step too.
std::string metrics_path(const std::string& configured) {
  if (configured != "auto") return configured;
  std::string name = "minilst_" + utc_time(true);
  if (const char* job = std::getenv("SLURM_JOB_ID")) name += std::string("_") + job;
  if (const char* task = std::getenv("SLURM_ARRAY_TASK_ID")) name += std::string("_") + task;
  return name + "_" + std::to_string(getpid()) + ".h5";
}

template <class T>
std::vector<double> to_host_doubles(const Vec<T>& v) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<double>(host.data(), host.data() + host.extent(0));
}

// The global sequences of a data-parallel replica's micro-steps (replica-major numbering).
std::vector<Batch> batches_of(const Deck& deck, long step, int replica) {
  std::vector<Batch> out;
  for (int m = 0; m < deck.run.grad_accum; ++m)
    out.push_back(synthetic_batch(deck.model.vocab, deck.run.seq_len, deck.run.seed, step,
                                  replica * deck.run.grad_accum + m));
  return out;
}

void print_summary(const RunSummary& s, const std::string& path) {
  std::printf("\n== summary (mean per measured step; min .. max over ranks) ==\n");
  for (const auto& phase : metric_phases()) {
    const auto& v = s.phase_avg_per_rank.at(phase);
    const double avg = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
    if (avg == 0.0) continue;
    std::printf("  %-10s %10.4f s   (%.4f .. %.4f)\n", phase.c_str(), avg, *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()));
  }
  std::printf("  memory high-water, MiB (max over ranks)   measured      model\n");
  const auto max_mib = [](const std::vector<std::uint64_t>& v) { return double(*std::max_element(v.begin(), v.end())) / kMiB; };
  for (const auto& [cat, v] : s.memory) {
    const auto model = s.memory_model.find(cat);
    std::printf("    %-13s %27.2f", cat.c_str(), max_mib(v));
    if (model != s.memory_model.end()) std::printf(" %10.2f", max_mib(model->second));
    std::printf("\n");
  }
  if (!s.plan.empty()) {  // arena against what was live at once (fragmentation) and against per-buffer allocation
    const double arena = max_mib(s.plan.at("arena_bytes")), bound = max_mib(s.plan.at("lower_bound_bytes"));
    std::printf("  memory plan: arena %.2f MiB = %.3f x lower bound %.2f MiB; per-buffer allocation held %.2f MiB; "
                "allocations per step after the first: %llu\n", arena, bound > 0 ? arena / bound : 1.0, bound,
                max_mib(s.plan.at("unplanned_peak_bytes")),
                static_cast<unsigned long long>(*std::max_element(s.allocations_after_first.begin(),
                                                                  s.allocations_after_first.end())));
  }
  std::printf("  communication, MiB sent per step (max over ranks):");
  for (const auto& [op, v] : s.comm_bytes) std::printf("  %s %.2f", op.c_str(), *std::max_element(v.begin(), v.end()) / kMiB);
  std::printf("\n  figure of merit: %.1f tokens/s per rank\n", s.fom);
  if (!path.empty()) std::printf("  metrics file: %s\n", path.c_str());
}

// offload with alpha auto, after the warm-up step: MEMO's alpha from what it
// measured (copy bandwidth, one layer's forward), the smallest over ranks.
template <class T>
void choose_alpha(const ModelConfig& cfg, std::int64_t S_local, ActivationStore<T>& store, OffloadRun& run,
                  MPI_Comm comm, bool root) {
  const auto bytes = offload_layer_bytes(cfg, S_local, sizeof(T), sizeof(accum_t<T>));
  AlphaInputs in{bytes.x, bytes.o, bytes.rest, run.bandwidth, run.layer_seconds, run.alpha_host_max};
  double alpha = solve_alpha(in);
  MPI_Allreduce(MPI_IN_PLACE, &alpha, 1, MPI_DOUBLE, MPI_MIN, comm);
  store.set_alpha(alpha);
  if (root) {
    std::printf("offload: alpha = %.4f (auto: measured %.2f GB/s and %.4f s of forward per layer; one layer moves "
                "%.2f MiB of x, %.2f MiB of o + lse and alpha x %.2f MiB of q, k, v, y; time bound %.4f, host "
                "bound %.4f)\n",
                alpha, run.bandwidth / 1e9, run.layer_seconds, bytes.x / kMiB, bytes.o / kMiB, bytes.rest / kMiB,
                alpha_for_time(in), run.alpha_host_max);
    std::fflush(stdout);
  }
}

template <class T>
int run_typed(const Deck& deck, const RunContext& ctx, const std::string& path) {
  const bool root = ctx.rank == 0;
  StopControl stopper(deck.run.time_limit_s, deck.run.watchdog_s, ctx.rank);
  const auto& cfg = deck.model;
  const std::int64_t S = deck.run.seq_len;

  TrainOptions train;
  train.seed = deck.run.seed;
  train.init_std = deck.run.init_std;
  train.norm_init_noise = deck.run.norm_init_noise;
  train.adamw.lr = deck.run.learning_rate;
  train.adamw.weight_decay = deck.run.weight_decay;

  ParallelSetup par(ctx.comm, deck.parallel, S);
  const auto& positions = par.local_positions();
  const std::int64_t S_local = std::int64_t(positions.size());  // chunking cuts the local tokens
  ModelOptions opts = resolve_chunks(deck, cfg, S_local, sizeof(T));
  OffloadRun offload;
  const std::string offload_error = plan_offload<T>(deck, cfg, opts, S_local, ctx.comm, offload);
  if (!offload_error.empty()) {  // before anything is allocated; the same verdict on every rank
    if (root) std::fprintf(stderr, "error: deck: %s\n", offload_error.c_str());
    return 2;
  }
  PhaseTimers timers;
  Trainer<T> trainer(cfg, opts, train, positions, &timers, par.attention_factory<T>(cfg, &timers));
  const int D = par.dp_size(), P = deck.parallel.sequence_parallel();
  if (root) {
    std::printf("model: %zu parameters, %s, memory.policy=%s\n", parameter_count(cfg), deck.run.precision.c_str(),
                to_string(opts.policy).c_str());
    const auto th = thread_counts();
    std::printf("threads per rank: Kokkos %s %d, BLAS %d%s\n", th.kokkos_space.c_str(), th.kokkos, th.blas,
                th.kokkos > 1 && th.blas > 1 ? " (they take turns: BLAS runs between Kokkos kernels)" : "");
    const int host_threads = th.kokkos_space == "OpenMP" ? th.kokkos : 1;
    if (th.cores_allowed > 0 && std::max(host_threads, th.blas) > th.cores_allowed)
      std::printf("warning: rank 0 may run on %d core(s) only (its CPU affinity) but asks for %d threads: they share "
                  "it. Open MPI binds a rank to one core: mpiexec --bind-to none (or --map-by slot:PE=%d); Slurm: "
                  "--cpus-per-task=%d\n",
                  th.cores_allowed, std::max(host_threads, th.blas), std::max(host_threads, th.blas),
                  std::max(host_threads, th.blas));
    std::printf("parallel: %d rank(s) = %d data-parallel x %d sequence-parallel (ulysses %d x ring %d): %s, "
                "rank 0 holds %lld of %lld tokens\n",
                ctx.nranks, D, P, deck.parallel.ulysses, deck.parallel.ring, par.strategy_name().c_str(),
                static_cast<long long>(S_local), static_cast<long long>(S));
    const auto describe = [&](const char* name, const ChunkSetting& set, int m, std::size_t per_token) {
      const std::int64_t n = effective_chunks(S_local, m), chunk = (S_local + n - 1) / n;
      std::printf("mst: %s = %d (%s), chunks of <= %lld tokens, %.2f MiB of intermediates each\n", name, m,
                  set.automatic ? "auto" : "deck", static_cast<long long>(chunk),
                  double(chunk) * double(per_token * sizeof(T)) / kMiB);
    };
    describe("mlp_chunks", deck.mst.mlp, opts.mlp_chunks, MlpBlock<T>::workspace_per_token(cfg));
    describe("lm_head_chunks", deck.mst.lm_head, opts.lm_head_chunks, LmHeadLoss<T>::workspace_per_token(cfg));
    if (offload.on) {
      const auto& store = trainer.activations();
      std::printf("offload: copy engine %s, host budget %.0f MiB per rank (%s), host memory %.2f MiB per rank",
                  store.engine()->name().c_str(), offload.budget / kMiB, deck.memory.host_budget_auto ? "auto" : "deck",
                  double(predict_host_offload(cfg, opts.policy, opts.offload.alpha, S_local, sizeof(T),
                                              sizeof(accum_t<T>))) / kMiB);
      if (opts.policy == MemoryPolicy::offload)
        std::printf(", alpha %s %.4f%s", offload.alpha_auto ? "auto: warm-up at" : "=", opts.offload.alpha,
                    offload.alpha_host_max < 1 ? " (bounded by the host budget)" : "");
      std::printf("\n");
    }
  }

  RunMetrics metrics;
  const double sequences = double(deck.run.grad_accum) * D;
  metrics.tokens_per_step = sequences * double(S);
  metrics.flops_per_step = sequences * model_flops_per_sequence(cfg, double(S));
  {  // per phase (the step benchmark's roofline): FLOPs of this rank's tokens, forward + backward
    const double local = double(deck.run.grad_accum);  // sequences this rank works on per step (its share of each)
    const auto f = phase_flops_per_sequence(cfg, double(S));
    const double share = 1.0 / double(P);              // sequence parallelism splits each sequence's work
    metrics.reals["flops_per_step_attention"] = local * share * f.attention;
    metrics.reals["flops_per_step_projections"] = local * share * f.projections;
    metrics.reals["flops_per_step_mlp"] = local * share * f.mlp;
    metrics.reals["flops_per_step_lm_head"] = local * share * f.lm_head;
  }
  metrics.warmup_steps = deck.run.warmup_steps;
  // The reference answer is the loss curve of the deck's batch; D data-parallel replicas train on D times
  // as many sequences per step (a different problem: compute its reference with run.grad_accum x D).
  if (D == 1) metrics.expected_loss = deck.reference.losses;
  else if (!deck.reference.losses.empty() && root)
    std::printf("reference: not checked: %d data-parallel replicas make a batch %d times the reference's\n", D, D);
  metrics.reference_rtol = deck.reference.rtol;
  metrics.config_yaml = deck.resolved_yaml;

  auto& arena = StepArena::instance();  // the first step is recorded and planned; later ones run in the arena
  arena.configure(deck.memory.plan, deck.memory.exact_solver ? PlanSolver::exact : PlanSolver::greedy);
  // What the metrics file holds besides the steps: memory, plan, models, provenance (collective).
  const auto fill_metrics = [&]() {
    if (arena.planning()) {
      metrics.plan["arena_bytes"] = arena.plan().arena_bytes;
      metrics.plan["lower_bound_bytes"] = arena.plan().lower_bound_bytes;
      metrics.plan["unplanned_peak_bytes"] = arena.unplanned_peak_bytes();
      metrics.attributes["plan_method"] = arena.plan().method;
      metrics.reals["plan_seconds"] = arena.plan_seconds();
      metrics.integers["plans_made"] = arena.plans_made();
    }
    metrics.attributes["planner"] = deck.memory.plan ? "plan" : "none";
    metrics.attributes["planner_solver"] = arena.solver_name();
    const auto& tracker = MemoryTracker::instance();
    for (int c = 0; c < kNumMemCategories; ++c)
      metrics.memory[category_name(MemCategory(c))] = tracker.high_water(MemCategory(c));
    metrics.memory["device_total"] = tracker.device_high_water();
    metrics.comm_model = predict_comm_bytes(cfg, opts, deck.parallel, par.layout(), par.sp_rank(), ctx.nranks,
                                            deck.run.grad_accum, sizeof(T));
    {  // the analytic model of this rank: the last step's alpha; host buffers sized by the run's largest
      ModelOptions now = opts;
      now.offload.alpha = trainer.activations().alpha();
      const auto pred = predict_rank_memory(cfg, now, deck.parallel, par.layout(), par.sp_rank(), deck.run.grad_accum,
                                            sizeof(T), sizeof(accum_t<T>), offload.alpha_max_used);
      metrics.memory_model = pred.bytes;
      if (deck.memory.plan)
        metrics.plan["model_arena_bytes"] =
            plan_step(pred.trace, pred.segments, deck.memory.exact_solver ? PlanSolver::exact : PlanSolver::greedy,
                      kArenaAlignment).arena_bytes;
    }
    for (auto& [k, v] : collect_provenance(ctx.comm, ctx.argc, ctx.argv)) metrics.attributes[k] = v;
    metrics.attributes["precision"] = deck.run.precision;
    metrics.attributes["memory_policy"] = to_string(opts.policy);
    metrics.attributes["comm_backend"] = par.world().backend();
    metrics.attributes["attention"] = par.strategy_name();
    metrics.attributes["ring_layout"] = to_string(deck.parallel.layout);
    metrics.attributes["ring_variant"] = to_string(deck.parallel.variant);
    metrics.attributes["ring_overlap"] = deck.parallel.overlap ? "true" : "false";
    metrics.attributes["cuda_aware_mpi"] = cuda_aware_mpi() ? "true" : "false";
    {
      const auto th = thread_counts();
      metrics.integers["kokkos_threads"] = th.kokkos;
      metrics.integers["blas_threads"] = th.blas;
      metrics.integers["cores_allowed"] = th.cores_allowed;
      metrics.attributes["kokkos_execution_space"] = th.kokkos_space;
    }
    metrics.integers["data_parallel"] = D;
    metrics.integers["sequence_parallel"] = P;
    metrics.integers["ulysses"] = deck.parallel.ulysses;
    metrics.integers["ring"] = deck.parallel.ring;
    metrics.integers["seq_len"] = S;
    metrics.integers["grad_accum"] = deck.run.grad_accum;
    metrics.integers["parameters"] = std::int64_t(parameter_count(cfg));
    metrics.integers["mlp_chunks"] = effective_chunks(S_local, opts.mlp_chunks);  // what ran: chunks of the local tokens
    metrics.integers["lm_head_chunks"] = effective_chunks(S_local, opts.lm_head_chunks);
    if (offload.on) {
      metrics.attributes["offload_engine"] = trainer.activations().engine()->name();
      metrics.reals["offload_bandwidth_measured_gbs"] = offload.bandwidth / 1e9;
      metrics.reals["offload_layer_forward_s"] = offload.layer_seconds;
      metrics.reals["offload_bandwidth_cap_gbs"] = opts.offload.bandwidth_gbs;
      metrics.reals["offload_host_budget_mib"] = offload.budget / kMiB;
      const auto layer = offload_layer_bytes(cfg, S_local, sizeof(T), sizeof(accum_t<T>));
      metrics.reals["offload_layer_bytes_x"] = layer.x;
      metrics.reals["offload_layer_bytes_o"] = layer.o;
      metrics.reals["offload_layer_bytes_rest"] = layer.rest;
      if (opts.policy == MemoryPolicy::offload) {
        metrics.reals["offload_alpha"] = trainer.activations().alpha();
        metrics.attributes["offload_alpha_mode"] = offload.alpha_auto ? "auto" : "deck";
        metrics.integers["offload_host_rows"] = trainer.activations().host_rows();
      }
    }
    metrics.attributes["mlp_chunks_mode"] = deck.mst.mlp.automatic ? "auto" : "deck";
    metrics.attributes["lm_head_chunks_mode"] = deck.mst.lm_head.automatic ? "auto" : "deck";
  };

  for (long step = 0; step < deck.run.steps; ++step) {
    const compat::ScopedRegion step_region("step");  // what Kokkos Tools show as the step
    timers.clear();
    Kokkos::Timer wall;
    double dump_seconds = 0;
    const auto local = shard_batches(par, batches_of(deck, step, par.dp_index()));
    arena.begin_step();
    double loss = trainer.compute_gradients(local, 1.0 / D);
    arena.end_step();
    const auto moved = trainer.activations().take_counters();  // every copy of the step is complete
    timers.add("copy_engine_busy", moved.busy_seconds);
    if (step == 0 && offload.on) {
      offload.bandwidth = moved.busy_seconds > 0 ? double(moved.bytes_to_host + moved.bytes_to_device) / moved.busy_seconds : 0;
      offload.layer_seconds = trainer.activations().forward_layer_seconds();
      if (offload.alpha_auto) choose_alpha<T>(cfg, S_local, trainer.activations(), offload, ctx.comm, root);
    }
    loss = reduce_step(trainer, par, loss, &timers);  // every rank shares the weights: the step's gradient
    const double gnorm = trainer.grad_norm();
    if (step == 0 && !deck.output.dump.empty()) {
      Kokkos::Timer dump_timer;
      if (root) {
        std::vector<Batch> all;  // every rank's sequences: rank 0 regenerates them from the seed
        for (int d = 0; d < D; ++d)
          for (auto& b : batches_of(deck, step, d)) all.push_back(std::move(b));
        write_tensor_dump(deck.output.dump, cfg, S, deck.resolved_yaml, all, loss,
                          to_host_doubles(trainer.params().flat()), to_host_doubles(trainer.grads().flat()));
        std::printf("tensor dump: %s\n", deck.output.dump.c_str());
      }
      dump_seconds = dump_timer.seconds();
    }
    trainer.apply_optimizer();
    compat::fence("end of step");
    timers.add("step", wall.seconds() - dump_seconds);

    metrics.steps.push_back({loss, gnorm, timers.all(), par.take_comm_bytes(),
                             {{"to_host", moved.bytes_to_host}, {"to_device", moved.bytes_to_device}},
                             arena.allocations_in_step()});
    if (root) {
      const double t = timers.get("step");
      std::printf("step %4ld/%d  loss %.6f  |grad| %.3e  %8.3f s  %10.1f tokens/s  device %.1f MiB%s\n",
                  step + 1, deck.run.steps, loss, gnorm, t, metrics.tokens_per_step / t,
                  double(MemoryTracker::instance().device_high_water()) / kMiB,
                  step < deck.run.warmup_steps ? "  (warm-up)" : "");
      std::fflush(stdout);
    }
    const bool last = step + 1 == deck.run.steps;
    const std::string stop = stopper.after_step(ctx.comm, ctx.nranks, timers.get("step"));  // the same on every rank
    if (!stop.empty() && !last) {
      metrics.complete = false;
      metrics.stop_reason = stop + ": stopped after step " + std::to_string(step + 1) + " of " +
                            std::to_string(deck.run.steps);
      if (root) std::printf("stopping: %s\n", metrics.stop_reason.c_str());
      break;
    }
    if (deck.output.flush_every > 0 && (step + 1) % deck.output.flush_every == 0 && !last) {
      metrics.complete = false;  // a snapshot of a run that goes on
      metrics.stop_reason = "running: written after step " + std::to_string(step + 1) + " of " +
                            std::to_string(deck.run.steps);
      fill_metrics();
      gather_and_write_metrics(ctx.comm, metrics, path);
      stopper.kick();
      metrics.complete = true;
      metrics.stop_reason.clear();
    }
  }

  stopper.kick();  // the final gather and write are progress too
  fill_metrics();
  arena.reset();  // every step buffer is gone; the arena goes before Kokkos does
  const auto summary = gather_and_write_metrics(ctx.comm, metrics, path);
  if (!root) return 0;  // the verdict is rank 0's, shared by run_deck
  print_summary(summary, path);
  if (summary.reference_check != "none")
    std::printf("reference: %s: %d step(s) compared with the deck's expected losses, largest relative difference "
                "%.3g (step %d), tolerance %.3g\n",
                summary.reference_check.c_str(), summary.reference_steps, summary.reference_max_rel_error,
                summary.reference_worst_step, deck.reference.rtol);
  const double final_loss = metrics.steps.back().loss;
  const std::string verdict = !metrics.complete ? "INCOMPLETE (" + metrics.stop_reason + ")"
                              : summary.valid   ? "VALID"
                                                : "INVALID";
  std::printf("RESULT: %s FOM=%.1f tokens/s/rank steps=%zu final_loss=%.6f ranks=%d metrics=%s\n", verdict.c_str(),
              summary.fom, metrics.steps.size(), final_loss, ctx.nranks, path.c_str());
  std::fflush(stdout);
  return !metrics.complete ? 4 : summary.valid ? 0 : 3;
}

}  // namespace

int run_deck(const Deck& deck, const RunContext& ctx) {
  // srun started several tasks but MPI sees one: the PMI wiring is wrong and every
  // task would run alone (a silent singleton); refuse rather than mislead.
  const char* step_tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  if (ctx.nranks == 1 && step_tasks && std::atoi(step_tasks) > 1) {
    std::fprintf(stderr, "error: srun started %s tasks but MPI sees 1 rank: check srun --mpi=pmix (or your site's "
                 "PMI) so that the tasks form one MPI job\n", step_tasks);
    return 2;
  }
  // The one parallel rule that needs the world size; the same verdict on every rank.
  const auto error = check_parallel(deck.model, deck.parallel, deck.run.seq_len, ctx.nranks);
  if (!error.empty()) {
    if (ctx.rank == 0) std::fprintf(stderr, "error: deck: %s\n", error.c_str());
    return 2;
  }
  if (const auto why = check_memory(deck, ctx); !why.empty()) {
    if (ctx.rank == 0) std::fprintf(stderr, "error: %s\n", why.c_str());
    return 2;
  }
  // The outputs: created and probed by rank 0 before the first step, not after the last.
  std::string path, output_error;
  if (ctx.rank == 0) {
    path = metrics_path(deck.output.metrics);
    output_error = prepare_output_file("output.metrics", path);
    if (output_error.empty() && !deck.output.dump.empty()) output_error = prepare_output_file("output.dump", deck.output.dump);
  }
  int output_ok = output_error.empty();
  MPI_Bcast(&output_ok, 1, MPI_INT, 0, ctx.comm);
  if (!output_ok) {
    if (ctx.rank == 0) std::fprintf(stderr, "error: %s\n", output_error.c_str());
    return 2;
  }
  if (ctx.rank == 0) {
    std::printf("%s\ndeck: %s\nresolved configuration:\n%s\n", version_string().c_str(), deck.path.c_str(),
                deck.resolved_yaml.c_str());
    std::fflush(stdout);
  }
  for (const auto& [k, v] : std::map<std::string, std::string>{{"deck", deck.path}, {"precision", deck.run.precision}})
    compat::declare_metadata(k, v);
  int code = deck.run.precision == "double" ? run_typed<double>(deck, ctx, path) : run_typed<float>(deck, ctx, path);
  MPI_Bcast(&code, 1, MPI_INT, 0, ctx.comm);  // every rank exits with rank 0's verdict
  return code;
}

}  // namespace minilst
