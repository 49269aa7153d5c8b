#include "results/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <numeric>

#include "core/kernel_choice.hpp"
#include "core/units.hpp"
#include "results/provenance.hpp"
#include "memory/tracker.hpp"
#include "model/lm_head.hpp"
#include "predict/memory_model.hpp"
#include "model/mlp_block.hpp"
#include "model/parameters.hpp"

namespace minilst {

namespace {

void print_threads() {
  const auto th = thread_counts();
  std::printf("threads per rank: Kokkos %s %d, BLAS %d%s\n", th.kokkos_space.c_str(), th.kokkos, th.blas,
              th.kokkos > 1 && th.blas > 1 ? " (they take turns: BLAS runs between Kokkos kernels)" : "");
  const int wanted = std::max(th.kokkos_space == "OpenMP" ? th.kokkos : 1, th.blas);
  if (th.cores_allowed > 0 && wanted > th.cores_allowed)
    std::printf("warning: rank 0 may run on %d core(s) only (its CPU affinity) but asks for %d threads: they share "
                "it. Open MPI binds a rank to one core: mpiexec --bind-to none (or --map-by slot:PE=%d); Slurm: "
                "--cpus-per-task=%d\n",
                th.cores_allowed, wanted, wanted, wanted);
}
// Where the model states live and what they cost per rank (the memory model's bytes).
void print_model_states(const Deck& deck, const std::map<std::string, std::uint64_t>& b, int nranks) {
  const auto zero = zero_options(deck, nranks);
  const auto of = [&](MemCategory c) { return double(b.at(category_name(c))); };
  const double device = of(MemCategory::weights) + of(MemCategory::gradients) + of(MemCategory::optimizer);
  const int T = deck.parallel.tensor;  // (tensor parallel: one rank's slice, over the ranks holding it)
  const ModelConfig slice = T > 1 ? local_model(deck.model, tensor_slice(deck.model, T, 0)) : deck.model;
  const auto sl = shard_layout(slice, zero.ranks, zero.stage > 0);
  std::printf("model states: %sZeRO stage %d over %d rank(s)%s: %.2f MiB on the device per rank (weights %.2f, "
              "gradients %.2f, optimizer %.2f)", T > 1 ? ("a 1/" + std::to_string(T) + " tensor-parallel slice, ").c_str() : "",
              zero.stage, zero.ranks, zero.optimizer_offload ? ", optimizer offload" : "",
              device / kMiB, of(MemCategory::weights) / kMiB, of(MemCategory::gradients) / kMiB,
              of(MemCategory::optimizer) / kMiB);
  if (zero.optimizer_offload) std::printf(", %.2f MiB in host memory", of(MemCategory::host_optimizer) / kMiB);
  if (zero.stage > 0)
    std::printf("; %zu units in shards of %zu elements per rank (padding %zu)", sl.units.size(), sl.shard_total,
                sl.shard_total * std::size_t(zero.ranks) - parameter_count(slice));
  std::printf("\n");
}

// run.machine: "predicted step 1.23 s, measured 1.30 s (0.95x) on NAME (FILE); phases: ..." (measured: the
// busiest rank's mean; the phases either side puts above 2% of the step, each predicted / measured).
void print_prediction(const RunSummary& s) {
  const auto& p = s.prediction;
  if (!p.known()) return;
  const double predicted = p.time.phases[Phase::step];
  const auto& measured = s.prediction_measured[Phase::step];
  const auto& ratio = s.prediction_ratio[Phase::step];
  if (!measured || !ratio) {
    std::printf("  predicted step %.4g s on %s (%s), not measured: no step after the warm-up\n", predicted,
                p.machine.c_str(), p.file.c_str());
    return;
  }
  std::printf("  predicted step %.4g s, measured %.4g s (%.2fx) on %s (%s machine file %s)", predicted,
              *measured, *ratio, p.machine.c_str(), p.kind.c_str(), p.file.c_str());
  const char* sep = "; phases, predicted/measured: ";
  for (const Phase phase : all_of<Phase>()) {
    const auto& r = s.prediction_ratio[phase];
    if (phase == Phase::step || !r) continue;
    const double pred = p.time.phases[phase], meas = *s.prediction_measured[phase];
    if (std::max(pred, meas) < 0.02 * *measured) continue;
    std::printf("%s%s %.2fx", sep, name_of(phase).c_str(), *r);
    sep = ", ";
  }
  std::printf("\n");
}
}  // namespace

void print_setup(const Deck& deck, const ModelOptions& opts, const ResolvedKernels& kernels,
                 const std::map<std::string, std::uint64_t>& model_states, const AttentionGeometry& g, int nranks,
                 int D, std::size_t T, const std::string& offload) {
  const auto& cfg = deck.model;
  std::printf("model: %zu parameters, %s, memory.policy=%s, kernels %s (attention %s)\n", parameter_count(cfg),
              name_of(deck.run.precision).c_str(), name_of(opts.policy).c_str(), describe(kernels.choice).c_str(),
              attention_kernel_name(kernels.choice, deck.run.precision).c_str());
  if (deck.run.precision == Precision::bf16) {
    std::printf("bf16: activations, transfers and the weight copy in bf16; gradients, master weights, AdamW moments "
                "and every accumulation in fp32 (%zu bytes per parameter); GEMM %s (%s",
                model_state_bytes(Precision::bf16), gemm_path_record(kernels.choice.gemm_bf16, true).c_str(),
                kernels.gemm_bf16_reason.c_str());
    const char* sep = ": ";
    for (const auto& [path, gflops] : kernels.gemm_bf16_gflops) {
      std::printf("%s%s %.0f GFLOP/s", sep, path.c_str(), gflops);
      sep = ", ";
    }
    std::printf(")\n");
  }
  if (deck.run.precision != Precision::float64) {
    std::printf("fp32 GEMM: %s (%s", gemm_path_record(kernels.choice.gemm_fp32, false).c_str(),
                kernels.gemm_fp32_reason.c_str());
    const char* sep = ": ";
    for (const auto& [path, gflops] : kernels.gemm_fp32_gflops) {
      std::printf("%s%s %.0f GFLOP/s", sep, path.c_str(), gflops);
      sep = ", ";
    }
    std::printf(")\n");
  }
  print_threads();
  const std::int64_t S_local = g.local_rows;
  const int TP = deck.parallel.tensor;
  const std::string tensor = TP > 1 ? " x " + std::to_string(TP) + " tensor-parallel" : "";
  std::printf("parallel: %d rank(s) = %d data-parallel x %d sequence-parallel (ulysses %d x ring %d)%s: %s, "
              "rank 0 holds %lld of %lld tokens%s\n",
              nranks, D, deck.parallel.sequence_parallel(), deck.parallel.ulysses, deck.parallel.ring, tensor.c_str(),
              g.name().c_str(), static_cast<long long>(S_local), static_cast<long long>(deck.run.seq_len),
              TP > 1 ? (" (" + std::to_string(S_local / TP) + " of the residual stream's)").c_str() : "");
  const auto describe = [&](const char* name, const ChunkSetting& set, int m, std::size_t per_token) {
    const std::int64_t n = effective_chunks(S_local, m), chunk = (S_local + n - 1) / n;
    std::printf("mst: %s = %d (%s), chunks of <= %lld tokens, %.2f MiB of intermediates each\n", name, m,
                set.automatic ? "auto" : "deck", static_cast<long long>(chunk),
                double(chunk) * double(per_token * T) / kMiB);
  };
  describe("mlp_chunks", deck.mst.mlp, opts.mlp_chunks, MlpBlock<float>::workspace_per_token(cfg));
  if (opts.policy == MemoryPolicy::offload && opts.offload.alpha > 0)
    std::printf("mst: under offload the MLP %s\n",
                opts.mlp_chunks > 1 ? "keeps nothing and recomputes each chunk in its backward (offload moves the rest)"
                                    : "runs as one chunk, its tensors among those offload keeps");
  describe("lm_head_chunks", deck.mst.lm_head, opts.lm_head_chunks, LmHeadLoss<float>::workspace_per_token(cfg));
  if (!offload.empty()) std::printf("%s\n", offload.c_str());
  print_model_states(deck, model_states, nranks);
  if (D > 1 && !deck.reference.losses.empty())
    std::printf("reference: not checked: %d data-parallel replicas make a batch %d times the reference's\n", D, D);
  std::fflush(stdout);
}

namespace {
std::string hms(double seconds) {  // h:mm:ss
  const long s = std::lround(std::max(0.0, seconds));
  char text[32];
  std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return text;
}
}  // namespace

void print_step(long step, const Deck& deck, double loss, double grad_norm, double seconds, double tokens_per_step,
                const StepProgress& progress) {
  char clock[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (gmtime_r(&now, &utc)) std::strftime(clock, sizeof clock, "%H:%M:%SZ", &utc);
  std::printf("step %4ld/%d  loss %.6f  |grad| %.3e  %8.3f s  %10.1f tokens/s  device %.1f MiB  %s  elapsed %s  eta %s%s\n",
              step + 1, deck.run.steps, loss, grad_norm, seconds, tokens_per_step / seconds,
              double(MemoryTracker::instance().device_high_water()) / kMiB, clock, hms(progress.elapsed_s).c_str(),
              hms(progress.eta_s).c_str(), step < deck.run.warmup_steps ? "  (warm-up)" : "");
  std::fflush(stdout);
}

void print_summary(const RunSummary& s, const std::string& path) {
  std::printf("\n== summary (mean per measured step; min .. max over ranks) ==\n");
  for (const Phase phase : all_of<Phase>()) {
    const auto& v = s.phase_avg_per_rank[phase];
    const double avg = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
    if (avg == 0.0) continue;
    std::printf("  %-20s %10.4f s   (%.4f .. %.4f)\n", name_of(phase).c_str(), avg, *std::min_element(v.begin(), v.end()),
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
  std::vector<std::pair<std::string, double>> sent;  // by name
  for (const CommOp op : metric_comm_ops())
    sent.push_back({name_of(op), *std::max_element(s.comm_bytes[op].begin(), s.comm_bytes[op].end())});
  std::sort(sent.begin(), sent.end());
  for (const auto& [op, v] : sent) std::printf("  %s %.2f", op.c_str(), v / kMiB);
  if (s.attention_imbalance > 0)  // the kernels' computed tiles (attention/attention_work.hpp)
    std::printf("\n  attention work: %.4g GFLOP per step (max over ranks), imbalance max/mean %.3f",
                *std::max_element(s.attention_flops.begin(), s.attention_flops.end()) / 1e9, s.attention_imbalance);
  std::printf("\n  figure of merit: %.1f tokens/s per rank\n", s.fom);
  if (s.energy_known)
    std::printf("  energy: %.1f J over the measured steps (%s: %s), %.2f tokens/J; whole run %.1f J\n", s.energy_joules,
                s.energy_source.c_str(), s.energy_note.c_str(), s.tokens_per_joule, s.energy_joules_run);
  else
    std::printf("  energy: unavailable (%s)\n", s.energy_note.c_str());
  if (s.mfu_known) {
    std::printf("  MFU: %.3f of the fixed peak (%.1f GFLOP/s per rank; model FLOPs: causal attention halved, "
                "recompute not counted; hardware %.3f, square attention %.3f); this run's GEMM rate %.1f GFLOP/s "
                "per rank (%.2f of the peak)", s.mfu, s.mfu_peak_gflops, s.mfu_conventions[FlopsConvention::hardware],
                s.mfu_conventions[FlopsConvention::square], s.peak_gflops,
                s.mfu_peak_gflops > 0 ? s.peak_gflops / s.mfu_peak_gflops : 0.0);
    if (s.nominal_peak_gflops > 0)
      std::printf(", %.3f of the device's nominal %.0f GFLOP/s", s.mfu_nominal, s.nominal_peak_gflops);
    const char* sep = "; per phase: ";
    for (const Phase phase : {Phase::attention, Phase::lm_head, Phase::mlp}) {
      if (s.mfu_phase[phase] <= 0) continue;
      std::printf("%s%s %.3f", sep, name_of(phase).c_str(), s.mfu_phase[phase]);
      sep = ", ";
    }
    std::printf("\n");
  }
  print_prediction(s);
  if (!path.empty()) std::printf("  metrics file: %s\n", path.c_str());
}

int print_result(const RunSummary& s, const RunMetrics& m, const Deck& deck, int nranks, const std::string& path) {
  if (s.reference_check != "none")
    std::printf("reference: %s: %d step(s) compared with the deck's expected losses, largest relative difference "
                "%.3g (step %d), tolerance %.3g\n",
                s.reference_check.c_str(), s.reference_steps, s.reference_max_rel_error, s.reference_worst_step,
                m.reference_rtol);
  if (s.reportable.yes())
    std::printf("run rules: reportable (RUN_RULES.md)\n");
  else
    std::printf("run rules: not reportable: %s (RUN_RULES.md)\n", s.reportable.reasons_text().c_str());
  const std::string verdict =
      std::string(run_verdict(m.complete, s.valid)) + (m.complete ? "" : " (" + m.stop_reason + ")");
  std::printf("%s\n", result_line(verdict, s.fom, m.steps.size(), m.steps.back().loss, nranks,
                                  s.mfu_known ? s.mfu : -1.0, (m.attributes.text.count("tier") ? m.attributes.text.at("tier") : std::string()), s.reportable.verdict(), path).c_str());
  std::fflush(stdout);
  return verdict_exit_code(m.complete, s.valid);
}

}  // namespace minilst
