// minilst_bench_mst: the MLP block and the LM head + loss alone, forward and
// backward, for each sequence length x mini-sequence count M: time (median of
// repeats after a warm-up) and workspace high-water (measured by the tracker and
// predicted), plus the machine's own SGEMM rate on the MLP's largest GEMM shape
// so a block's speed reads as a fraction of what the BLAS can do. Writes HDF5:
//   /seq_lens [nS], /chunks [nM]
//   /mlp/{seconds, workspace_bytes, model_workspace_bytes, gflops} [nS, nM]
//   /lm_head/... the same;  root attributes: shapes, precision, sgemm_gflops, provenance
// The CPU counterpart of MsT's Tables 12-15 (standard vs M = 2, 4, 8, 16, 32).
#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "core/kernel_choice.hpp"
#include "io/h5.hpp"
#include "results/provenance.hpp"
#include "kernels/select.hpp"
#include "memory/memory_context.hpp"
#include "model/lm_head.hpp"
#include "model/mlp_block.hpp"

using namespace minilst;

namespace {

struct Options {
  std::vector<std::int64_t> seq_lens{1024, 2048, 4096, 8192};
  std::vector<int> chunks{1, 2, 4, 8, 16, 32};
  int hidden = 256, intermediate = 688, vocab = 8192, repeats = 3;
  std::string output = "mst_bench.h5";
};

template <class T>
void fill_random(const Vec<T>& v, std::uint64_t seed, double scale) {
  auto h = Kokkos::create_mirror_view(v);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  for (std::size_t i = 0; i < h.extent(0); ++i) h(i) = T(normal(rng));
  Kokkos::deep_copy(v, h);
}

template <class T>
Vec<T> flat(const Mat<T>& m) { return Vec<T>(m.data(), m.span()); }

// Median seconds of `repeats` runs of f after one warm-up; workspace high-water of the last.
template <class F>
std::pair<double, std::uint64_t> measure(int repeats, F&& f) {
  f();
  std::vector<double> t;
  auto& tracker = MemoryTracker::instance();
  for (int r = 0; r < repeats; ++r) {
    tracker.reset_high_water();
    Kokkos::fence();
    Kokkos::Timer timer;
    f();
    Kokkos::fence();
    t.push_back(timer.seconds());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], tracker.high_water(MemCategory::workspace)};
}

// The memory model's prediction of a block's workspace: its own buffers, replayed without compute.
template <class F>
double replayed_workspace(F&& replay) {
  CountingMemory counting;
  replay();
  return double(counting.tracker().high_water(MemCategory::workspace));
}

// The kernels of a float run on this machine (the deck's defaults, resolved).
KernelChoice float_kernels() { return resolve_kernel_choice(KernelChoice{}, Precision::float32, 64).choice; }

double sgemm_gflops(std::int64_t m, int k, int n) {
  Mat<float> a("a", m, k), b("b", k, n), c("c", m, n);
  fill_random(flat(a), 1, 1.0);
  fill_random(flat(b), 2, 1.0);
  const auto [s, unused] = measure(3, [&] { kernels::gemm(float_kernels(), kernels::Op::N, kernels::Op::N, 1.0f, a, b, 0.0f, c); });
  (void)unused;
  return 2.0 * double(m) * k * n / s / 1e9;
}

// Per block, [nS x nM]: median seconds, measured and predicted workspace high-water, GFLOP/s.
struct BlockResults {
  explicit BlockResults(std::size_t n) : seconds(n), workspace(n), model(n), gflops(n) {}
  std::vector<double> seconds, workspace, model, gflops;
};

void write_results(const Options& opt, const ModelConfig& cfg, double sgemm, const BlockResults& mlp,
                   const BlockResults& head) {
  const hsize_t nS = opt.seq_lens.size(), nM = opt.chunks.size();
  const std::string partial = opt.output + ".partial";
  {
    auto file = h5::create_file(partial);
    const hid_t f = file.id();
    h5::attr(f, "schema", std::string("minilst-bench-mst"));
    h5::attr(f, "hidden", std::int64_t(cfg.hidden));
    h5::attr(f, "intermediate", std::int64_t(cfg.intermediate));
    h5::attr(f, "vocab", std::int64_t(cfg.vocab));
    h5::attr(f, "precision", std::string("float"));
    h5::attr(f, "repeats", std::int64_t(opt.repeats));
    h5::attr(f, "sgemm_gflops", sgemm);
    for (const auto& [k, v] : collect_provenance(MPI_COMM_WORLD, 0, nullptr)) h5::attr(f, k, v);
    h5::write(f, "seq_lens", opt.seq_lens, {nS}, "tokens");
    h5::write(f, "chunks", std::vector<std::int64_t>(opt.chunks.begin(), opt.chunks.end()), {nM}, "1");
    const std::vector<hsize_t> shape{nS, nM};
    for (const auto& [b, r] : {std::pair<std::string, const BlockResults*>{"mlp", &mlp},
                                {"lm_head", &head}}) {
      h5::write(f, b + "/seconds", r->seconds, shape, "s");
      h5::write(f, b + "/workspace_bytes", r->workspace, shape, "B");
      h5::write(f, b + "/model_workspace_bytes", r->model, shape, "B");
      h5::write(f, b + "/gflops", r->gflops, shape, "GFLOP/s");
    }
  }
  std::rename(partial.c_str(), opt.output.c_str());
  std::printf("wrote %s\n", opt.output.c_str());
}

int run(const Options& opt) {
  using T = float;
  ModelConfig cfg;
  cfg.hidden = opt.hidden;
  cfg.heads = 1;
  cfg.kv_heads = 1;
  cfg.layers = 1;
  cfg.intermediate = opt.intermediate;
  cfg.vocab = opt.vocab;
  ParamSet<T> params(cfg, "params", MemCategory::weights), grads(cfg, "grads", MemCategory::weights);
  fill_random(params.flat(), 3, 0.05);

  const std::size_t nS = opt.seq_lens.size(), nM = opt.chunks.size();
  BlockResults mlp_r(nS * nM), head_r(nS * nM);
  auto &mlp_s = mlp_r.seconds, &mlp_ws = mlp_r.workspace, &mlp_model = mlp_r.model, &mlp_gf = mlp_r.gflops;
  auto &head_s = head_r.seconds, &head_ws = head_r.workspace, &head_model = head_r.model, &head_gf = head_r.gflops;
  const double d = cfg.hidden, I = cfg.intermediate, V = cfg.vocab;
  const double sgemm = sgemm_gflops(opt.seq_lens.back(), cfg.hidden, cfg.intermediate);
  std::printf("SGEMM [%lld x %d] x [%d x %d]: %.1f GFLOP/s (the roofline of both blocks)\n",
              static_cast<long long>(opt.seq_lens.back()), cfg.hidden, cfg.hidden, cfg.intermediate, sgemm);
  std::printf("%8s %5s | %10s %9s %10s | %10s %9s %10s\n", "S", "M", "mlp s", "GFLOP/s", "ws MiB", "head s",
              "GFLOP/s", "ws MiB");
  for (std::size_t i = 0; i < nS; ++i) {
    const std::int64_t S = opt.seq_lens[i];
    Tracked<Mat<T>> y("y", MemCategory::activations, S, cfg.hidden), z("z", MemCategory::activations, S, cfg.hidden),
        dy("dy", MemCategory::activations, S, cfg.hidden);
    fill_random(flat(y.view()), 4, 1.0);
    fill_random(flat(z.view()), 5, 1.0);
    std::vector<std::int64_t> host_labels(S);
    std::mt19937_64 rng(6);
    for (auto& l : host_labels) l = std::int64_t(rng() % std::uint64_t(cfg.vocab));
    Tracked<Vec<std::int64_t>> labels("labels", MemCategory::activations, S);
    Kokkos::deep_copy(labels.view(), Kokkos::View<const std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                          host_labels.data(), host_labels.size()));
    for (std::size_t j = 0; j < nM; ++j) {
      const int M = opt.chunks[j];
      const std::size_t k = i * nM + j;
      MlpBlock<T> mlp(cfg, M, float_kernels(), nullptr);
      std::tie(mlp_s[k], mlp_ws[k]) = measure(opt.repeats, [&] {
        mlp.forward(z.view(), y.view(), params.layers[0], LayerActivations<T>{});
        mlp.backward(dy.view(), grads.layers[0], z.view(), y.view(), params.layers[0], LayerActivations<T>{});
      });
      mlp_model[k] = replayed_workspace([&] {
        LayerActivations<T> a;
        a.y = y.view();
        mlp.replay_forward(a);
        mlp.replay_backward(a);
      });
      mlp_gf[k] = 2.0 * S * d * I * 11 / mlp_s[k] / 1e9;  // 3 forward + 8 backward GEMMs (2 recomputed)
      LmHeadLoss<T> head(cfg, M, float_kernels(), nullptr, LogitsKeeping::in_place);
      std::tie(head_s[k], head_ws[k]) = measure(opt.repeats, [&] {
        head.forward_backward(dy.view(), y.view(), labels.view(), params, grads, 1.0 / double(S));
      });
      head_model[k] = replayed_workspace([&] { head.replay(S); });
      head_gf[k] = 2.0 * S * d * V * 3 / head_s[k] / 1e9;  // logits, dW, dX
      std::printf("%8lld %5d | %10.4f %9.1f %10.2f | %10.4f %9.1f %10.2f\n", static_cast<long long>(S), M,
                  mlp_s[k], mlp_gf[k], mlp_ws[k] / 1048576.0, head_s[k], head_gf[k], head_ws[k] / 1048576.0);
      std::fflush(stdout);
    }
  }

  write_results(opt, cfg, sgemm, mlp_r, head_r);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  Options opt;
  CLI::App app{"minilst_bench_mst: MLP block and LM head alone, time and workspace against the chunk count M"};
  app.add_option("--seq-lens", opt.seq_lens, "sequence lengths")->delimiter(',');
  app.add_option("--chunks", opt.chunks, "chunk counts M (1 = unchunked)")->delimiter(',')->check(CLI::PositiveNumber);
  app.add_option("--hidden", opt.hidden, "d")->check(CLI::PositiveNumber);
  app.add_option("--intermediate", opt.intermediate, "I")->check(CLI::PositiveNumber);
  app.add_option("--vocab", opt.vocab, "V")->check(CLI::Range(2, 1 << 30));
  app.add_option("--repeats", opt.repeats, "timed repeats per point (median)")->check(CLI::PositiveNumber);
  app.add_option("--output", opt.output, "HDF5 output file");
  int code = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    code = app.exit(e);
    MPI_Finalize();
    return code == 0 ? 0 : 2;
  }
  Kokkos::initialize(argc, argv);
  try {
    code = run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    code = 1;
  }
  Kokkos::finalize();
  MPI_Finalize();
  return code;
}
