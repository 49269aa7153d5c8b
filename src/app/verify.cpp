#include "app/verify.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "core/progress.hpp"
#include "predict/deck_plan.hpp"
#include "predict/memory_model.hpp"
#include "predict/prediction.hpp"
#include "app/training.hpp"
#include "attention/local_attention.hpp"
#include "core/kernel_choice.hpp"
#include "io/h5.hpp"
#include "io/output_lock.hpp"
#include "job/agreement.hpp"
#include "job/node_resources.hpp"
#include "job/stop.hpp"
#include "job/watchdog.hpp"
#include "model/step_reduce.hpp"
#include "parallel/broadcast.hpp"
#include "results/run_record.hpp"
#include "parallel/fault_injection.hpp"
#include "app/verify_gather.hpp"
#include "app/verify_tolerance.hpp"
#include "app/verify_export.hpp"

namespace minilst {

namespace {
using verify::CheckRow;
using verify::StepCapture;

// ||a - b|| / ||b|| over the pairs (sums of squares); 0 when both are zero, inf when only b is.
struct RelL2 {
  double diff = 0, ref = 0;
  void add(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) {  // a shape mismatch is a failure, not a crash
      diff = std::numeric_limits<double>::infinity();
      return;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
      diff += (a[i] - b[i]) * (a[i] - b[i]);
      ref += b[i] * b[i];
    }
  }
  double value() const {
    if (ref == 0) return diff == 0 ? 0 : std::numeric_limits<double>::infinity();
    return std::sqrt(diff / ref);
  }
};

template <class V>
std::vector<double> host_flat(const V& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<double>(h.data(), h.data() + h.size());
}

// Wraps a factory's strategies in CapturingAttention (and, under the mask_drop fault, builds
// the struck rank's strategy with plain causal masking; a ring drops it in its compute only,
// RingAttention's constructor: what travels where stays the sequence's on every rank).
template <class T>
AttentionFactory<T> capturing(AttentionFactory<T> inner, StepCapture& out, bool lse, bool ring) {
  return [inner, &out, lse, ring](Vec<const std::int64_t> positions, Vec<const std::int64_t> q_lo,
                                  const SequenceMask& mask) {
    const bool drop = fault::mask_dropped_here() && !ring;
    auto strategy = inner(positions, drop ? Vec<const std::int64_t>() : q_lo, drop ? SequenceMask{} : mask);
    return std::unique_ptr<AttentionStrategy<T>>(
        std::make_unique<verify::CapturingAttention<T>>(std::move(strategy), out, lse));
  };
}

// The reference step on this rank alone: float64, every token local, the default policy
// and kernels, the deck's weights' seed and mask; all replicas' micro-steps in order.
// verify's inputs: where the deck leaves run.init_std_qk at 0, Wq and Wk are drawn with std
// sqrt(3 / hidden), so that after the norm q.k / sqrt(h) has a std of about 3 (init_std_qk^2 x
// hidden): peaked scores, whose row maxima move as a ring's key blocks arrive and make the
// online softmax rescale. With the default 0.02 the scores' std is about 0.02^2 hidden (0.03 at
// hidden 64): every softmax nearly flat, and a wrong rescale goes unseen.
Deck with_peaked_scores(const Deck& deck) {
  Deck d = deck;
  if (d.run.init_std_qk == 0) d.run.init_std_qk = std::sqrt(3.0 / double(std::max<std::int64_t>(1, d.model.hidden)));
  return d;
}

// How peaked the reference's attention scores are: layer 0, query head 0 (kv head 0), q_i . k_j /
// sqrt(h) over the causal keys of up to 128 query rows spread over the sequence; their std, and the
// share of the rows whose running maximum, the keys taken in 2R blocks in order, rises by more than
// 1 (the softmax rescaled by e) after the row's first block.
struct ScoreShape {
  double std = 0, moving = 0;
  int rows = 0;
};
ScoreShape score_shape(const verify::ReferenceStep& ref, const ModelConfig& m, int R) {
  ScoreShape out;
  if (ref.tensors.micro.empty() || ref.tensors.micro[0].empty()) return out;
  const auto& q = ref.tensors.micro[0][0][verify::kQ];
  const auto& k = ref.tensors.micro[0][0][verify::kK];
  const std::size_t h = std::size_t(m.head_dim()), qw = std::size_t(m.heads) * h, kw = std::size_t(m.kv_heads) * h;
  const std::size_t S = qw ? q.size() / qw : 0;
  if (S < 2 || k.size() < S * kw) return out;
  const std::size_t block = std::max<std::size_t>(1, S / std::size_t(2 * std::max(1, R)));
  double sum = 0, sum2 = 0, n = 0;
  int moved = 0;
  for (std::size_t i = S / 128 + 1; i < S; i += S / 128 + 1) {
    double running = -HUGE_VAL;
    bool rose = false;
    for (std::size_t j = 0; j <= i; ++j) {
      double s = 0;
      for (std::size_t c = 0; c < h; ++c) s += q[i * qw + c] * k[j * kw + c];
      s /= std::sqrt(double(h));
      sum += s, sum2 += s * s, n += 1;
      if (j >= block && s > running + 1 && running > -HUGE_VAL) rose = true;
      running = std::max(running, s);
    }
    moved += rose;
    ++out.rows;
  }
  out.std = n > 1 ? std::sqrt(std::max(0.0, sum2 / n - (sum / n) * (sum / n))) : 0;
  out.moving = out.rows ? double(moved) / out.rows : 0;
  return out;
}

verify::ReferenceStep reference_step(const Deck& deck, int replicas) {
  verify::ReferenceStep ref;
  for (int d = 0; d < replicas; ++d)
    for (auto& b : batches_of(deck, 0, d)) ref.batches.push_back(std::move(b));
  ref.mask = deck.options.mask;
  ModelOptions plain;
  plain.mask = deck.options.mask;
  ref.tensors.layers = deck.model.layers;
  std::vector<std::int64_t> positions(std::size_t(deck.run.seq_len));
  std::iota(positions.begin(), positions.end(), 0);
  const int head_dim = deck.model.head_dim();
  const KernelChoice kernels = plain.kernels;
  using Strategy = std::unique_ptr<AttentionStrategy<double>>;
  StepCapture& out = ref.tensors;
  Trainer<double> t(deck.model, plain, train_options(deck.run), positions, nullptr,
                    [&](Vec<const std::int64_t> p, Vec<const std::int64_t> q_lo, const SequenceMask&) -> Strategy {
                      Strategy local = std::make_unique<LocalAttention<double>>(p, q_lo, head_dim, kernels);
                      return std::make_unique<verify::CapturingAttention<double>>(std::move(local), out, true);
                    });
  ref.loss = t.compute_gradients(ref.batches);
  ref.params = host_flat(t.params().flat());
  ref.grads = host_flat(t.grads().flat());
  return ref;
}

// The table's rows in the certification order (verify.hpp).
std::vector<CheckRow> compare(const StepCapture& run, double run_loss, const std::vector<double>& run_grads,
                              const verify::ReferenceStep& ref, const ModelConfig& cfg, verify::Tolerance tol,
                              bool lse) {
  std::vector<CheckRow> rows;
  const auto tensor_row = [&](int l, int t) {
    RelL2 e;
    for (std::size_t m = 0; m < ref.tensors.micro.size(); ++m) e.add(run.micro.at(m)[l][t], ref.tensors.micro[m][l][t]);
    rows.push_back({l, verify::tensor_name(t), e.value(), tol.tensor});
  };
  for (int l = 0; l < cfg.layers; ++l)
    for (int t : {verify::kQ, verify::kK, verify::kV, verify::kO, verify::kLse})
      if (t != verify::kLse || lse) tensor_row(l, t);
  rows.push_back({-1, "loss", std::abs(run_loss - ref.loss) / std::max(std::abs(ref.loss), 1e-300), tol.loss});
  for (int l = cfg.layers - 1; l >= 0; --l)
    for (int t : {verify::kDo, verify::kDq, verify::kDk, verify::kDv}) tensor_row(l, t);
  for (const auto& slot : parameter_layout(cfg)) {
    const auto b = std::ptrdiff_t(slot.offset), e = b + std::ptrdiff_t(slot.size());
    RelL2 err;
    err.add(std::vector<double>(run_grads.begin() + b, run_grads.begin() + e),
            std::vector<double>(ref.grads.begin() + b, ref.grads.begin() + e));
    rows.push_back({-1, "grad " + slot.name, err.value(), tol.tensor});
  }
  return rows;
}

std::string row_name(const CheckRow& r) {
  return r.layer >= 0 ? "layer " + std::to_string(r.layer) + " " + r.tensor : r.tensor;
}

void print_table(const std::vector<CheckRow>& rows) {
  std::printf("%-5s  %-24s  %-10s  %-8s  %s\n", "layer", "tensor", "rel_err", "tol", "ok");
  for (const auto& r : rows)
    std::printf("%-5s  %-24s  %-10.3e  %-8.1e  %s\n", r.layer >= 0 ? std::to_string(r.layer).c_str() : "-",
                r.tensor.c_str(), r.rel_err, r.tol, r.ok() ? "ok" : "FAIL");
}

std::string spaceless(std::string s) {
  std::replace(s.begin(), s.end(), ' ', '_');
  return s;
}

// Where this rank's captured tensors go in the global ones (verify_gather.hpp).
template <class T>
verify::RankPlacement placement_of(Training<T>& t) {
  verify::RankPlacement where;
  where.replica = t.par.dp_index();
  where.positions = t.par.local_positions();
  const auto& g = t.geometry;
  where.group_positions = g.U() > 1 ? t.par.layout().group_positions(g.me_ring) : where.positions;
  const auto heads = g.U() > 1 ? ulysses_q_heads(g.me_ulysses, g.U(), g.heads) : HeadRange{0, g.heads};
  where.head_first = heads.first;
  where.head_count = heads.count;
  where.head_chunks = g.head_chunks;
  if (t.tp.split()) {  // this rank's slice of the heads
    const TensorSlice& slice = t.tp.slice();
    where.q_first = slice.q_head0, where.q_count = slice.q_heads;
    where.kv_first = slice.kv_head0, where.kv_count = slice.kv_heads;
    where.kv_partial = slice.kv_copies > 1;
  }
  return where;
}

// Collective: the deck's first step observed, the reference on rank 0, the verdict.
template <class T>
int verify_typed(const Deck& deck, const RunContext& ctx, const VerifyArgs& args, const std::string& out_path) {
  const bool root = ctx.rank == 0;
  const ResolvedKernels kernels =
      agree_on_kernels(deck.options.kernels, deck.run.precision, deck.model.head_dim(), ctx.comm);
  const auto states =
      predict_model_states(deck.model, zero_options(deck, ctx.nranks), deck.run.precision, deck.parallel.tensor);
  const bool lse = !deck.parallel.rsa_seed_backward();  // RSA's seed backward keeps P, not the LSE
  StepCapture mine;
  mine.layers = deck.model.layers;
  PhaseTimers timers;
  Training<T> t(deck, ctx.comm, kernels.choice, double(states.at("host_optimizer")), timers,
                [&](AttentionFactory<T> inner) {
                  return capturing<T>(std::move(inner), mine, lse, deck.parallel.ring > 1);
                });
  if (!t.offload.error().empty()) {
    if (root) std::fprintf(stderr, "error: deck: %s\n", t.offload.error().c_str());
    return 2;
  }
  const int D = t.par.dp_size();
  progress_stage("the layout's step on " + std::to_string(ctx.nranks) + " rank(s)");
  double loss = t.trainer.compute_gradients(t.par.shard(batches_of(deck, 0, t.par.dp_index())), 1.0 / D);
  loss = reduce_step(t.trainer, t.par, loss, &timers);
  const auto grads = t.trainer.states().gathered_gradients();

  const auto& g = t.geometry;
  const verify::RankPlacement where = placement_of(t);
  verify::CaptureShape shape{deck.run.seq_len, deck.model.layers, deck.model.heads, deck.model.kv_heads,
                          deck.model.head_dim(), deck.run.grad_accum, D, lse};
  const StepCapture run = verify::gather_to_root(mine, where, shape, ctx.comm);

  int code = 0;
  if (root) {
    progress_stage("the single-rank float64 reference step");
    const auto ref = reference_step(deck, D);
    progress_stage("comparing every tensor with the reference");
    const auto tol = verify::tolerance_of(deck.run.precision);
    const auto rows = compare(run, loss, grads, ref, deck.model, tol, lse);
    const auto first = std::find_if(rows.begin(), rows.end(), [](const CheckRow& r) { return !r.ok(); });
    double worst = 0;
    for (const auto& r : rows) worst = std::isnan(r.rel_err) ? r.rel_err : std::max(worst, r.rel_err);
    verify::VerifySummary s;
    s.verdict = first == rows.end() ? "PASSED" : "FAILED";
    s.layout = spaceless(g.name()) + ":" + (t.tp.split() ? "T" + std::to_string(t.tp.size()) + "x" : "") + "U" +
               std::to_string(g.U()) + "xR" + std::to_string(g.R()) + "xD" + std::to_string(D);
    s.precision = name_of(deck.run.precision);
    s.first_failure = first == rows.end() ? "none" : spaceless(row_name(*first));
    s.config_yaml = deck.resolved_yaml;
    s.ranks = ctx.nranks;
    std::printf("verify: %s, %d rank(s), %s, policy %s: %zu tensors against the single-rank float64 reference\n",
                s.layout.c_str(), ctx.nranks, s.precision.c_str(), name_of(deck.options.policy).c_str(), rows.size());
    const ScoreShape shape = score_shape(ref, deck.model, g.R());
    s.score_std = shape.std, s.moving_max = shape.moving;
    std::printf("verify: inputs: Wq, Wk drawn with std %.4g (run.init_std_qk); attention scores (layer 0, head 0, %d "
                "rows) of std %.3g; rows whose running maximum rises by more than 1 after their first key block: "
                "%.0f%%\n", deck.run.init_std_qk > 0 ? deck.run.init_std_qk : deck.run.init_std, shape.rows, shape.std,
                100 * shape.moving);
    print_table(rows);
    if (first != rows.end())
      std::printf("verify: FAILED: the first tensor that differs is %s (rel_err %.3e > tol %.1e)\n",
                  row_name(*first).c_str(), first->rel_err, first->tol);
    const StopSignalsHeld held;  // a signal now ends verify after its files and RESULT line, not in them
    verify::write_table(out_path, rows, s);
    if (!args.export_path.empty()) {
      verify::write_export(args.export_path, deck.model, deck.run.seq_len, ref, s);
      std::printf("verify: reference step exported to %s\n", args.export_path.c_str());
    }
    std::printf("RESULT: verify %s certified=%s layout=%s precision=%s policy=%s ranks=%d tensors=%zu "
                "max_rel_err=%.3e first_failure=%s verify=%s\n",
                s.verdict.c_str(), s.verdict == "PASSED" ? "yes" : "no", s.layout.c_str(), s.precision.c_str(),
                name_of(deck.options.policy).c_str(), ctx.nranks, rows.size(), worst, s.first_failure.c_str(),
                out_path.c_str());
    std::fflush(stdout);
    code = first == rows.end() ? 0 : 3;
  }
  MPI_Bcast(&code, 1, MPI_INT, 0, ctx.comm);
  return code;
}

// Why the deck cannot be verified (the same verdict on every rank), or "".
std::string refusal(const Deck& deck, const RunContext& ctx) {
  if (const auto p = check_parallel(deck.model, deck.parallel, deck.run.seq_len, ctx.nranks); !p.empty())
    return "deck: " + p;
  if (const auto z = check_zero(deck.parallel, ctx.nranks, deck.memory.optimizer_offload); !z.empty())
    return "deck: " + z;
  if (const auto k = kernel_choice_refusal(deck.options.kernels, deck.run.precision, deck.model.head_dim()); !k.empty())
    return "deck: " + k;
  return "";
}

// Whether the run's step and the float64 single-rank reference fit (collective): the run's own fit
// check (predict/prediction.hpp), then on rank 0 the reference (the deck at float64 on one rank,
// every activation kept), with its copies, and the two steps' captured q, k, v and o of every layer.
std::string fit_problem(const Deck& deck, const RunContext& ctx) {
  const AvailableMemory available = available_memory(ctx.comm);
  Prediction run;
  std::string why = predict_for_run(deck, ctx.nranks, available, run);
  if (why.empty() && ctx.rank == 0) {
    Deck ref = deck;
    ref.run.precision = Precision::float64;
    ref.parallel.ulysses = ref.parallel.ring = ref.parallel.tensor = 1, ref.parallel.zero = 0;
    ref.memory.optimizer_offload = false;
    ref.options.policy = MemoryPolicy::full;
    std::string error;
    const DeckPlan plan = plan_deck(ref, ref.run.seq_len, {1, false, false}, error);
    const ModelConfig& m = deck.model;
    const double captures = 2.0 * m.layers * double(deck.run.seq_len) * 2.0 * (m.heads + m.kv_heads) * m.head_dim() * 8;
    // rank 0 holds its own step, the reference and the comparison's copies: verify's peak measured 3.3x the
    // reference's plan (tiny deck, S = 16384); 3.5x it is asked for
    const double need = error.empty() ? 3.5 * double(plan.memory.at("device_total")) + captures : 0;
    const double have = available.device > 0 ? available.device : available.host;
    if (have > 0 && need > have)
      why = "verify: the float64 single-rank reference and the two steps' captured tensors need about " +
            std::to_string(long(need / 1048576)) + " MiB on rank 0, which has " + std::to_string(long(have / 1048576)) +
            " MiB available: verify a shorter run.seq_len (or fewer layers) of the same layout";
  }
  return broadcast_string(why, ctx.comm);
}

// The table's default name: the metrics file's, ".h5" replaced by ".verify.h5".
std::string table_path(const Deck& deck, const RunContext& ctx, const VerifyArgs& args) {
  if (!args.out.empty()) return args.out;
  std::string p = metrics_path(deck, ctx.nranks);
  const std::string ext = ".h5";
  if (p.size() >= ext.size() && p.compare(p.size() - ext.size(), ext.size(), ext) == 0) p.resize(p.size() - ext.size());
  return p + ".verify.h5";
}

// Rank 0: each output may be written (h5::prepare_output), an earlier one of its kind replaced.
std::string prepare(const std::string& path, const char* schema, bool overwrite) {
  if (const auto problem = h5::prepare_output(path, schema, overwrite); !problem.empty()) return problem;
  if (const auto problem = replace_problem(path); !problem.empty()) return problem;
  allow_replacing(path, file_id(path));
  return "";
}
}  // namespace

int run_verify(const Deck& deck, const RunContext& ctx, const VerifyArgs& args) {
  ctx.watchdog->arm(0, "");  // verify is small and collective throughout; errors end the job (main)
  install_plan_signal_handlers("verify");  // a signal ends it at once; its files are written whole at the end
  std::string why = refusal(deck, ctx);
  if (why.empty()) why = fit_problem(deck, ctx);  // collective: the same verdict on every rank
  if (!why.empty()) {
    if (ctx.rank == 0) std::fprintf(stderr, "error: %s\n", why.c_str());
    return 2;
  }
  std::string out_path, problem;
  OutputLock table_lock, export_lock;  // rank 0: held until the files are written (io/output_lock.hpp)
  if (ctx.rank == 0) {
    out_path = table_path(deck, ctx, args);
    problem = table_lock.acquire(out_path);
    if (problem.empty() && !args.export_path.empty() && args.export_path != out_path)
      problem = export_lock.acquire(args.export_path);
    for (const auto* lock : {&table_lock, &export_lock})  // a signal ends verify: its locks go
      if (lock->held()) remove_when_stopped(lock->path());
    if (problem.empty()) problem = prepare(out_path, "minilst-verify", deck.output.overwrite);
    if (problem.empty() && !args.export_path.empty()) {
      if (args.export_path == out_path)
        problem = "--export and the table name the same file '" + out_path + "'";
      else if (const auto p = prepare(args.export_path, "minilst-verify-export", deck.output.overwrite); !p.empty())
        problem = "--export: " + p;
    } else if (!problem.empty()) {
      problem = (args.out.empty() ? "the verify table (beside output.metrics): " : "--out: ") + problem;
    }
  }
  problem = broadcast_string(problem, ctx.comm);
  if (!problem.empty()) {
    if (ctx.rank == 0) std::fprintf(stderr, "error: %s\n", problem.c_str());
    return 2;
  }
  const Deck peaked = with_peaked_scores(deck);  // the run's and the reference's inputs
  switch (deck.run.precision) {
    case Precision::float32: return verify_typed<float>(peaked, ctx, args, out_path);
    case Precision::float64: return verify_typed<double>(peaked, ctx, args, out_path);
    case Precision::bf16: return verify_typed<bf16>(peaked, ctx, args, out_path);
  }
  return 2;
}

}  // namespace minilst
