// minilst_bench_kernels: single kernels against the machine's own SGEMM rate,
// measured in the same process. Prints one JSON object (for scripts/bench/).
//   sgemm      C = A B, float, [m, k] x [k, n]
//   bf16gemm   the same product in bf16 (fp32 accumulation, --gemm-bf16's path or the one a run would
//              choose: src/core/kernel_choice.hpp) beside SGEMM
//   attention  causal flash attention forward + backward, float or bf16, S tokens
//              on one rank (positions 0..S-1), d = heads x head dim, by the kernel
//              --kernel selects (run.attention_kernel's choices); useful FLOPs counted
//              as forward 2 S^2 d and backward 5 S^2 d (model/flops.hpp), against the
//              dense GEMM rate of the same type (and SGEMM's)
//              --documents SPEC (run.documents' syntax), --window W: the same S tokens
//              under that mask, timed in the same process beside plain causal attention:
//              time_ratio = masked / causal time (forward + backward), against
//              visible_ratio (the visible query-key pairs' ratio, the ideal: 1/N for N
//              equal documents, about w/S for a window w << S) and tile_ratio (the
//              ratio of the pairs the kernel computes, attention/attention_work.hpp)
// Times are the median of --repeats runs after a warm-up.
#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "attention/attention_work.hpp"
#include "core/batch.hpp"
#include "core/config.hpp"
#include "core/host_threads.hpp"
#include "core/kernel_choice.hpp"
#include "kernels/gemm.hpp"
#include "kernels/select.hpp"
#include "model/documents.hpp"
#include "predict/flops.hpp"

using namespace minilst;

namespace {

// m := normal(0, scale), each block of 256 rows from its own stream, on every core.
template <class T>
void fill_random(const Mat<T>& m, std::uint64_t seed, double scale) {
  auto h = Kokkos::create_mirror_view(m);
  constexpr std::size_t kRows = 256;
  on_host_cores((h.extent(0) + kRows - 1) / kRows, [&](std::size_t b) {
    std::mt19937_64 rng(seed ^ (b * 0x9E3779B97F4A7C15ull));
    std::normal_distribution<double> normal(0.0, scale);
    for (std::size_t i = b * kRows; i < std::min(h.extent(0), (b + 1) * kRows); ++i)
      for (std::size_t j = 0; j < h.extent(1); ++j) h(i, j) = T(normal(rng));
  });
  Kokkos::deep_copy(m, h);
}

template <class F>
double median_seconds(int repeats, F&& f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    compat::fence("bench: start");
    Kokkos::Timer timer;
    f();
    compat::fence("bench: stop");
    t.push_back(timer.seconds());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The kernels this process runs (resolved in main from --kernel and --gemm-bf16, as a run resolves its deck's).
KernelChoice g_choice;

// C [m, n] = op(A) op(B) in T, op = transpose where asked (A stored [k, m], B stored [n, k]).
template <class T>
double gemm_gflops(int m, int n, int k, int repeats, bool ta = false, bool tb = false) {
  Mat<T> a("a", ta ? k : m, ta ? m : k), b("b", tb ? n : k, tb ? k : n), c("c", m, n);
  fill_random(a, 1, 1.0);
  fill_random(b, 2, 1.0);
  const auto op = [](bool t) { return t ? kernels::Op::T : kernels::Op::N; };
  const double s = median_seconds(repeats, [&] { kernels::gemm(g_choice, op(ta), op(tb), T(1.0f), a, b, T(0.0f), c); });
  return 2.0 * m * double(n) * k / s / 1e9;
}
double sgemm_gflops(int m, int n, int k, int repeats, bool ta = false, bool tb = false) {
  return gemm_gflops<float>(m, n, k, repeats, ta, tb);
}


struct AttentionBench {
  int seq, heads, kv_heads, head_dim, repeats;
  int gemm_size;  // the dense GEMM the rate is compared with: gemm_size^3 in the attention's type
  double sgemm;   // GFLOP/s, measured in this process
  SequenceMask mask;  // causal_only(): plain causal attention only
  std::string documents;
};

// Causal attention forward + backward in T by the kernel the process's setting
// selects, printed as JSON beside the dense GEMM rate of T; 2 where the kernel asked
// for cannot run.
template <class T>
int attention_bench(const AttentionBench& b) {
  using A = accum_t<T>;
  const int S = b.seq, Hh = b.heads * b.head_dim, Gh = b.kv_heads * b.head_dim;
  Mat<T> q("q", S, Hh), kk("k", S, Gh), v("v", S, Gh), o("o", S, Hh), d_o("do", S, Hh);
  Mat<T> dq("dq", S, Hh), dk("dk", S, Gh), dv("dv", S, Gh);
  Mat<A> lse("lse", S, b.heads), delta("D", S, b.heads);
  Vec<std::int64_t> pos("pos", S);
  const Vec<const std::int64_t> causal;  // q_lo empty: every query sees from position 0
  Kokkos::parallel_for("iota", Kokkos::RangePolicy<ExecSpace>(0, S), KOKKOS_LAMBDA(const int i) { pos(i) = i; });
  fill_random(q, 3, 1.0);
  fill_random(kk, 4, 1.0);
  fill_random(v, 5, 1.0);
  fill_random(d_o, 6, 1.0);
  const KernelChoice& variant = g_choice;
  const int h = b.head_dim;
  const double fwd = median_seconds(b.repeats, [&] {
    kernels::attention_forward<T>(variant, o, lse, q, kk, v, pos, causal, pos, h);
  });
  const double bwd = median_seconds(b.repeats, [&] {
    kernels::attention_backward<T>(variant, dq, dk, dv, delta, d_o, o, lse, q, kk, v, pos, causal, pos, h);
  });
  std::string masked_json;  // the masked run beside the causal one
  if (!b.mask.causal_only()) {
    std::vector<std::int64_t> all(S), lo;
    for (int i = 0; i < S; ++i) all[i] = i;
    lo = b.mask.q_lo(all);
    Vec<std::int64_t> q_lo("q_lo", S);
    Kokkos::deep_copy(q_lo, Kokkos::View<const std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(lo.data(), S));
    const Vec<const std::int64_t> ql = q_lo;
    const double m_fwd = median_seconds(b.repeats, [&] {
      kernels::attention_forward<T>(variant, o, lse, q, kk, v, pos, ql, pos, h);
    });
    const double m_bwd = median_seconds(b.repeats, [&] {
      kernels::attention_backward<T>(variant, dq, dk, dv, delta, d_o, o, lse, q, kk, v, pos, ql, pos, h);
    });
    const Precision p = std::is_same<T, bf16>::value ? Precision::bf16 : Precision::float32;
    const auto tiles = attention_tiles(variant, p, b.heads / b.kv_heads);
    const double visible = double(computed_tiles(all, lo, all, {1, 1}).pairs), causal = 0.5 * S * (S + 1.0);
    const double tile_m = double(computed_tiles(all, lo, all, tiles).pairs), tile_c = double(computed_tiles(all, {}, all, tiles).pairs);
    char text[512];
    std::snprintf(text, sizeof text,
                  ", \"documents\": \"%s\", \"n_documents\": %zu, \"window\": %lld, \"masked_forward_s\": %.6f, "
                  "\"masked_backward_s\": %.6f, \"time_ratio\": %.4f, \"visible_ratio\": %.4f, \"tile_ratio\": %.4f",
                  b.documents.c_str(), b.mask.doc_starts.size() + 1, (long long)b.mask.window, m_fwd, m_bwd,
                  (m_fwd + m_bwd) / (fwd + bwd), visible / causal, tile_m / tile_c);
    masked_json = text;
  }
  const double f_fwd = attention_flops_forward(double(S), Hh), f_bwd = attention_flops_backward(double(S), Hh);
  const double rate = (f_fwd + f_bwd) / (fwd + bwd) / 1e9;
  const int g = b.gemm_size;
  const double gemm = std::is_same<T, float>::value ? b.sgemm : gemm_gflops<T>(g, g, g, b.repeats);
  std::printf("{\"kernel\": \"attention\", \"precision\": \"%s\", \"attention_kernel\": \"%s\", \"seq_len\": %d, "
              "\"heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, \"forward_s\": %.6f, \"backward_s\": %.6f, "
              "\"forward_gflops\": %.2f, \"backward_gflops\": %.2f, \"gflops\": %.2f, \"gemm_gflops\": %.2f, "
              "\"gemm_size\": %d, \"fraction_of_gemm\": %.4f, \"sgemm_gflops\": %.2f, \"fraction_of_sgemm\": %.4f%s}\n",
              std::is_same<T, bf16>::value ? "bf16" : "float",
              attention_kernel_name(g_choice, std::is_same<T, bf16>::value ? Precision::bf16 : Precision::float32).c_str(), S,
              b.heads, b.kv_heads, h, fwd, bwd, f_fwd / fwd / 1e9, f_bwd / bwd / 1e9, rate, gemm, g, rate / gemm,
              b.sgemm, rate / b.sgemm, masked_json.c_str());
  return 0;
}

// The command line's values.
struct BenchArgs {
  int m = 2048, n = 2048, k = 2048, repeats = 3;
  bool ta = false, tb = false;
  int seq = 8192, heads = 16, kv_heads = 4, head_dim = 64, gemm_size = 2048;
  std::string documents;
  std::int64_t window = 0;
  std::string precision = "float", kernel = "auto", gemm_bf16 = "auto", gemm_fp32 = "auto";
  bool bf16gemm = false, sgemm = false;  // the subcommand (else attention)
};

// The benchmark asked for, after Kokkos is up: its JSON line on stdout; the exit code.
int run_bench(const BenchArgs& a) {
  KernelChoice request;
  parse_name(a.kernel, request.attention);
  parse_name(a.gemm_bf16, request.gemm_bf16);
  parse_name(a.gemm_fp32, request.gemm_fp32);
  const Precision p = a.bf16gemm || a.precision == "bf16" ? Precision::bf16 : Precision::float32;
  if (const auto why = kernel_choice_refusal(request, p, a.head_dim); !why.empty()) {
    std::fprintf(stderr, "error: %s\n", why.c_str());
    return 2;
  }
  const ResolvedKernels resolved = resolve_kernel_choice(request, p, a.head_dim);
  g_choice = resolved.choice;
  const bool shaped = a.sgemm || a.bf16gemm;
  const int g = shaped ? 2048 : a.gemm_size;  // the attention's comparison: its --gemm-size
  const int m = a.m, n = a.n, k = a.k, repeats = a.repeats;
  const bool ta = a.ta, tb = a.tb;
  const double sgemm = sgemm_gflops(shaped ? m : g, shaped ? n : g, shaped ? k : g, repeats);
  if (a.bf16gemm) {
    const double s32 = ta || tb ? sgemm_gflops(m, n, k, repeats, ta, tb) : sgemm;
    const double s16 = gemm_gflops<bf16>(m, n, k, repeats, ta, tb);
    std::printf("{\"kernel\": \"bf16gemm\", \"m\": %d, \"n\": %d, \"k\": %d, \"ta\": %d, \"tb\": %d, "
                "\"gflops\": %.2f, \"sgemm_gflops\": %.2f, \"ratio_to_sgemm\": %.3f, \"path\": \"%s\", "
                "\"reason\": \"%s\"}\n",
                m, n, k, int(ta), int(tb), s16, s32, s16 / s32, gemm_path_record(g_choice.gemm_bf16, true).c_str(),
                resolved.gemm_bf16_reason.c_str());
    return 0;
  }
  if (a.sgemm) {
    const double rate = ta || tb ? sgemm_gflops(m, n, k, repeats, ta, tb) : sgemm;
    std::printf("{\"kernel\": \"sgemm\", \"m\": %d, \"n\": %d, \"k\": %d, \"ta\": %d, \"tb\": %d, \"gflops\": %.2f, "
                "\"path\": \"%s\"}\n",
                m, n, k, int(ta), int(tb), rate, gemm_path_record(g_choice.gemm_fp32, false).c_str());
    return 0;
  }
  SequenceMask mask;
  try {
    mask = {document_starts(a.documents, a.seq, 1), a.window};
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "error: --documents %s\n", e.what());
    return 2;
  }
  const AttentionBench b{a.seq, a.heads, a.kv_heads, a.head_dim, repeats, a.gemm_size, sgemm, mask, a.documents};
  return a.precision == "bf16" ? attention_bench<bf16>(b) : attention_bench<float>(b);
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  CLI::App app{"miniLST kernel benchmarks against the machine's SGEMM rate (JSON on stdout)"};
  app.require_subcommand(1);
  app.fallthrough();  // --gemm-bf16 after the subcommand too
  BenchArgs a;
  auto* sg = app.add_subcommand("sgemm", "float GEMM rate");
  auto* bg = app.add_subcommand("bf16gemm", "bf16 GEMM rate (fp32 accumulation) beside SGEMM's");
  for (auto* sub : {sg, bg}) {
    sub->add_option("--m", a.m);
    sub->add_option("--n", a.n);
    sub->add_option("--k", a.k);
    sub->add_option("--repeats", a.repeats);
    sub->add_flag("--ta", a.ta, "A transposed");
    sub->add_flag("--tb", a.tb, "B transposed");
  }
  auto* at = app.add_subcommand("attention", "causal attention forward + backward");
  at->add_option("--seq-len", a.seq);
  at->add_option("--heads", a.heads);
  at->add_option("--kv-heads", a.kv_heads);
  at->add_option("--head-dim", a.head_dim);
  at->add_option("--repeats", a.repeats);
  at->add_option("--gemm-size", a.gemm_size, "the GEMM rate compared with: n^3 in the attention's type (a GPU needs n >= 8192)")
      ->check(CLI::Range(64, 32768));
  at->add_option("--documents", a.documents, "packed documents, run.documents' syntax (\"fixed:1024\", \"lognormal:6.5:1\"): "
                                             "timed beside plain causal attention");
  at->add_option("--window", a.window, "a sliding window of W keys (model.sliding_window), timed beside causal")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 40));
  at->add_option("--precision", a.precision, "float | bf16")->check(CLI::IsMember({"float", "bf16"}));
  at->add_option("--kernel", a.kernel, "auto | portable | tensor_core (run.attention_kernel)")
      ->check(CLI::IsMember(names_of<AttentionKernel>()));
  app.add_option("--gemm-bf16", a.gemm_bf16, "the bf16 GEMM path (run.gemm_bf16)")->check(CLI::IsMember(names_of<GemmPath>()));
  app.add_option("--gemm-fp32", a.gemm_fp32, "the fp32 GEMM path (run.gemm_fp32)")->check(CLI::IsMember(names_of<GemmPath>()));
  CLI11_PARSE(app, argc, argv);
  a.sgemm = sg->parsed();
  a.bf16gemm = bg->parsed();
  Kokkos::initialize(argc, argv);
  const int rc = run_bench(a);
  Kokkos::finalize();
  MPI_Finalize();
  return rc;
}
