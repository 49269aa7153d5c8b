#include "results/run_record.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/kernel_choice.hpp"
#include "core/phases.hpp"
#include "job/slurm_ids.hpp"
#include "kernels/gemm_onednn.hpp"
#include "results/provenance.hpp"
#include "results/tier.hpp"
#include "minilst_git.hpp"  // generated at build time: MINILST_GIT_DIRTY
#include "minilst_build_info.hpp"  // generated: MINILST_BUILD_TYPE
#include "kernels/tile_ops.hpp"
#include "memory/step_arena.hpp"
#include "attention/attention_work.hpp"
#include "memory/activation_store.hpp"
#include "predict/flops.hpp"
#include "model/parameters.hpp"
#include "parallel/mpi_communicator.hpp"

namespace minilst {

RunMetrics start_run_metrics(const Deck& deck, int D, int P, const Prediction& prediction) {
  RunMetrics m;
  const double S = double(deck.run.seq_len), sequences = double(deck.run.grad_accum) * D;
  m.tokens_per_step = sequences * S;
  m.flops_per_step = prediction.plan.flops_per_step;
  m.flops = prediction.plan.flops;
  m.prediction = prediction.time;
  // per phase (the step benchmark's roofline): FLOPs of this rank's share of its sequences (1/P of
  // each, and 1/T of that under tensor parallelism), forward + backward
  const auto& f = prediction.phase_flops;
  const double local = double(deck.run.grad_accum) / (double(P) * deck.parallel.tensor);
  m.attributes.reals["flops_per_step_attention"] = local * f.attention;
  m.attributes.reals["flops_per_step_projections"] = local * f.projections;
  m.attributes.reals["flops_per_step_mlp"] = local * f.mlp;
  m.attributes.reals["flops_per_step_lm_head"] = local * f.lm_head;
  m.warmup_steps = deck.run.warmup_steps;
  // The reference answer is the loss curve of the deck's batch; D replicas train on D times as
  // many sequences per step (a different problem: its reference needs run.grad_accum x D).
  if (D == 1) m.expected_loss = deck.reference.losses;
  m.reference_rtol = reference_tolerance(deck);
  m.config_yaml = deck.resolved_yaml;
  m.rules.build_type = MINILST_BUILD_TYPE;
  m.rules.data_parallel = D;
  m.rules.reference_given = !deck.reference.losses.empty();
  m.rules.problem_named = !deck.reference.problem.empty();
  m.rules.reference_rtol = m.reference_rtol;
  m.rules.rtol_limit = deck.run.precision == Precision::bf16 ? kBf16LossTolerance : kReportableRtol;
  m.rules.reference_steps = int(deck.reference.losses.size());
  m.rules.problem_matches = deck.problem_matches_reference();
  m.rules.offload_bandwidth_gbs = deck.options.offload.bandwidth_gbs;
  m.rules.warmup_steps = deck.run.warmup_steps;
  m.attributes.text["deck"] = deck.path;
  m.attributes.text["problem_digest"] = deck.problem_digest;
  const TierCheck tier = check_tier(deck.run.tier, deck.problem_digest, MINILST_GIT_DIRTY != 0);  // RUN_RULES.md, Tiers
  m.attributes.text["tier"] = tier.text();
  m.attributes.text["tier_claimed"] = tier.claimed;
  m.attributes.text["shipped_deck"] = tier.shipped_deck;
  m.attributes.text["run_name"] = run_name(deck, D * P);
  return m;
}

namespace {
void record_memory(RunMetrics& m, const Deck& deck, ParallelSetup& par, const RunFacts& facts) {
  const auto& arena = StepArena::instance();
  if (arena.planning()) {
    m.plan["arena_bytes"] = arena.plan().arena_bytes;
    m.plan["lower_bound_bytes"] = arena.plan().lower_bound_bytes;
    m.plan["unplanned_peak_bytes"] = arena.unplanned_peak_bytes();
    m.attributes.text["plan_method"] = arena.plan().method;
    m.attributes.reals["plan_seconds"] = arena.plan_seconds();
    m.attributes.integers["plans_made"] = arena.plans_made();
  }
  m.attributes.text["planner"] = deck.memory.plan ? "plan" : "none";
  m.attributes.text["planner_solver"] = arena.solver_name();
  const auto& tracker = MemoryTracker::instance();
  for (int c = 0; c < kNumMemCategories; ++c) m.memory[category_name(MemCategory(c))] = tracker.high_water(MemCategory(c));
  m.memory["device_total"] = tracker.device_high_water();
  // The analytic model of this rank: the last step's alpha; host buffers sized by the run's largest.
  m.memory_model = facts.predicted.memory.bytes;
  if (deck.memory.plan) m.plan["model_arena_bytes"] = facts.predicted.arena_bytes;
}

// The measured steps' MFU as the metrics file computes it (each step timed on its slowest
// rank, against ranks x MFU's peak), for the run rules; -1 where no step was measured
// or no rate is known. Collective over comm.
double measured_mfu(const RunMetrics& m, MPI_Comm comm) {
  int nranks = 1, nsteps = int(m.steps.size());
  MPI_Comm_size(comm, &nranks);
  MPI_Allreduce(MPI_IN_PLACE, &nsteps, 1, MPI_INT, MPI_MIN, comm);  // the steps every rank finished
  std::vector<double> slowest;
  for (int s = 0; s < nsteps; ++s) {
    slowest.push_back(m.steps[std::size_t(s)].seconds[Phase::step]);
  }
  if (nsteps > 0) MPI_Allreduce(MPI_IN_PLACE, slowest.data(), nsteps, MPI_DOUBLE, MPI_MAX, comm);
  const int first = std::min(m.warmup_steps, nsteps);
  double seconds = 0;
  for (int s = first; s < nsteps; ++s) seconds += slowest[std::size_t(s)];
  if (seconds <= 0 || m.mfu_peak_gflops <= 0) return -1;
  return m.flops_per_step * double(nsteps - first) / seconds / (double(nranks) * m.mfu_peak_gflops * 1e9);
}

// The run rules' facts known once the run is recorded: ranks sharing a core, the MFU.
void record_rule_facts(RunMetrics& m, MPI_Comm comm) {
  const auto& text = m.attributes.text;
  const auto shared = text.find("cores_shared"), note = text.find("cores_shared_note");
  m.rules.shared_cores = shared != text.end() && shared->second == "yes" && note != text.end() ? note->second : "";
  m.rules.mfu = measured_mfu(m, comm);
}
}  // namespace

namespace {
// The attention work the kernels do in a step (the computed tiles only).
void record_attention_work(RunMetrics& m, const Deck& deck, ParallelSetup& par, const RunFacts& facts) {
  const AttentionGeometry& g = facts.geometry;
  const bool recompute =
      store_buffers(facts.options.policy, deck.model.layers, facts.options.offload.alpha).recompute_attention();
  const auto w = step_attention_work(deck.model, g, par.layout(), deck.options.mask,
                                     attention_tiles(facts.kernels.choice, deck.run.precision,
                                                     g.q_heads_here() / g.kv_heads_here()),
                                     scalar_bytes(deck.run.precision), deck.run.grad_accum, recompute);
  m.attention = {{"flops_forward", w.flops_forward}, {"flops_backward", w.flops_backward},
                 {"bytes_forward", w.bytes_forward}, {"bytes_backward", w.bytes_backward}};
  m.attention_hop_flops = w.hop_flops;
  m.attention_hop_bytes = w.hop_bytes;
}
}  // namespace

void record_run(RunMetrics& m, const Deck& deck, ParallelSetup& par, const RunFacts& facts) {
  record_memory(m, deck, par, facts);
  m.comm_model = facts.predicted.comm;
  // The plans this process made (a run plans once: predict/prediction.hpp; run.machine: probe adds its
  // calibration steps' own) and the ranks re-modelled at alpha auto's choice.
  m.attributes.integers["deck_plans"] = deck_plans_made();
  m.attributes.integers["rank_remodels"] = rank_remodels();
  record_attention_work(m, deck, par, facts);
  auto& text = m.attributes.text;
  for (auto& [k, v] : collect_provenance(par.world_comm(), facts.argc, facts.argv)) text[k] = v;
  text["precision"] = name_of(deck.run.precision);
  m.attributes.integers["zero_stage"] = deck.parallel.zero;
  text["optimizer_offload"] = deck.memory.optimizer_offload ? "true" : "false";
  const ResolvedKernels& k = facts.kernels;
  text["kernel_choice"] = describe(k.choice);  // the whole choice; the keys below say each part
  if (deck.run.precision == Precision::bf16) {  // which bf16 GEMM ran, and why
    text["gemm_bf16"] = gemm_path_record(k.choice.gemm_bf16, true);
    text["gemm_bf16_reason"] = k.gemm_bf16_reason;
    const auto rate = [&](const char* path) { return k.gemm_bf16_gflops.count(path) ? k.gemm_bf16_gflops.at(path) : 0.0; };
    m.attributes.reals["gemm_bf16_dot_gflops"] = rate("avx512_bf16");
    m.attributes.reals["gemm_bf16_tiles_gflops"] = rate("fp32_tiles");
    m.attributes.reals["gemm_bf16_onednn_gflops"] = rate("onednn");
  }
  if (deck.run.precision != Precision::float64) {  // which fp32 GEMM ran (bf16: its fp32 tiles'), and why
    text["gemm_fp32"] = gemm_path_record(k.choice.gemm_fp32, false);
    text["gemm_fp32_reason"] = k.gemm_fp32_reason;
    for (const auto& [path, gflops] : k.gemm_fp32_gflops) m.attributes.reals["gemm_fp32_" + path + "_gflops"] = gflops;
  }
  text["cpu_matrix_isa"] = kernels::cpu_matrix_isa();  // the CPU's bf16 matrix hardware oneDNN may use
  text["kernel_variant"] = name_of(k.choice.variant);
  text["attention_kernel"] = attention_kernel_name(k.choice, deck.run.precision);
#if defined(KOKKOS_ENABLE_CUDA)
  text["attention_tile_blocking"] = text["attention_kernel"] == "portable" ? "device: the team's threads"
                                                                          : "device: WMMA 16 x 16 fragments, 4 warps";
#else
  text["attention_tile_blocking"] =  // the register blocking of the build's ISA, for the tiles' type (fp32 under bf16)
      deck.run.precision == Precision::float64 ? kernels::tile::host::blocking<double>()
                                               : kernels::tile::host::blocking<float>();
#endif
  text["memory_policy"] = name_of(facts.options.policy);
  text["comm_backend"] = par.world().backend();
  text["attention"] = facts.geometry.name();
  text["ring_layout"] = name_of(deck.parallel.layout);
  text["ring_variant"] = name_of(deck.parallel.variant);
  text["rsa_backward"] = name_of(deck.parallel.rsa_backward);
  text["ring_overlap"] = par.ring_overlaps() ? "true" : "false";  // what ran, not what was asked
  text["cuda_aware_mpi"] = cuda_aware_mpi() ? "true" : "false";
  text["mlp_chunks_mode"] = deck.mst.mlp.automatic ? "auto" : "deck";
  text["lm_head_chunks_mode"] = deck.mst.lm_head.automatic ? "auto" : "deck";
  const auto th = thread_counts();
  text["kokkos_execution_space"] = th.kokkos_space;
  auto& ints = m.attributes.integers;
  ints["kokkos_threads"] = th.kokkos;
  ints["blas_threads"] = th.blas;
  ints["cores_allowed"] = th.cores_allowed;
  ints["data_parallel"] = par.dp_size();
  ints["sequence_parallel"] = deck.parallel.sequence_parallel();
  ints["tensor_parallel"] = deck.parallel.tensor;
  ints["ulysses"] = deck.parallel.ulysses;
  ints["ulysses_head_chunks"] = facts.geometry.head_chunks;
  ints["ring"] = deck.parallel.ring;
  ints["seq_len"] = deck.run.seq_len;
  ints["grad_accum"] = deck.run.grad_accum;
  ints["parameters"] = std::int64_t(parameter_count(deck.model));
  const std::int64_t S_local = facts.geometry.local_rows / deck.parallel.tensor;  // what ran: chunks of the residual rows
  ints["mlp_chunks"] = effective_chunks(S_local, facts.options.mlp_chunks);
  ints["lm_head_chunks"] = effective_chunks(S_local, facts.options.lm_head_chunks);
  m.attributes.merge(facts.reported);
  record_rule_facts(m, par.world_comm());
}

std::string run_name(const Deck& deck, int nranks) {
  const int U = deck.parallel.ulysses, R = deck.parallel.ring, D = std::max(1, nranks / std::max(1, U * R));
  std::string layout = U > 1 && R > 1 ? "u" + std::to_string(U) + "xr" + std::to_string(R)
                       : U > 1        ? "u" + std::to_string(U)
                       : R > 1        ? "r" + std::to_string(R)
                                      : "single";
  if (D > 1) layout += "_dp" + std::to_string(D);
  return std::filesystem::path(deck.path).stem().string() + "_" + layout + "_" + std::to_string(nranks) + "r";
}

namespace {
// A Slurm identifier as a part of a file name: its characters other than [A-Za-z0-9._-]
// replaced by '_' (with a warning: Slurm sets numbers), `unset` when it is not set.
std::string job_name_part(const char* variable, const std::string& unset) {
  const char* value = std::getenv(variable);
  if (!value) return unset;
  const std::string part = sanitized_name_part(value);
  if (!safe_name_part(value))
    std::fprintf(stderr, "warning: %s='%s' holds characters other than A-Za-z0-9._-: the metrics file is named "
                 "with '%s'\n", variable, value, part.c_str());
  return part.empty() ? unset : part;
}
}  // namespace

std::string metrics_path(const Deck& deck, int nranks) {
  if (deck.output.metrics != "auto") return deck.output.metrics;
  std::string name = run_name(deck, nranks) + "_" + utc_time(true) + "_" + job_name_part("SLURM_JOB_ID", "local");
  if (const auto task = job_name_part("SLURM_ARRAY_TASK_ID", ""); !task.empty()) name += "_" + task;
  return name + "_" + std::to_string(getpid()) + ".h5";
}

}  // namespace minilst
