// The CUDA copy engine (src/memory/cuda_copy_engine.*), which CPU-only CI cannot
// run: built against a CUDA Kokkos, this program compiles and links it.
// `--version` (the ctest) prints the Kokkos and CUDA versions without touching
// the GPU. Without arguments, on a GPU: copies device -> pinned host -> device
// and checks the bytes, counts, tickets; then measures the overlap that the
// engine exists for: a compute kernel on the default instance alone, the copies
// alone, and both at once (prints the three times and the hidden fraction).
#include <Kokkos_Core.hpp>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "kernels/compat.hpp"
#include "memory/cuda_copy_engine.hpp"

namespace {

using Dir = minilst::CopyEngine::Direction;

// A compute kernel of about `ms` milliseconds on the default instance.
void compute(const Kokkos::View<float*>& x, int iterations) {
  Kokkos::parallel_for("busy_work", Kokkos::RangePolicy<>(0, x.extent(0)), KOKKOS_LAMBDA(const int i) {
    float v = x(i);
    for (int k = 0; k < iterations; ++k) v = v * 0.999f + 0.001f;
    x(i) = v;
  });
}

int functional() {
  int failures = 0;
  const std::size_t n = std::size_t(64) << 20;  // 64 Mi floats = 256 MiB
  Kokkos::View<float*> dev("dev", n), back("back", n), work("work", 1 << 24);
  Kokkos::View<float*, minilst::compat::HostPinnedSpace> host("host", n);
  Kokkos::parallel_for("fill", n, KOKKOS_LAMBDA(const std::size_t i) { dev(i) = float(i % 1000003); });
  Kokkos::fence();
  minilst::CudaCopyEngine engine;
  const std::size_t bytes = n * sizeof(float);
  const auto t1 = engine.submit(host.data(), dev.data(), bytes, Dir::to_host);
  const auto t2 = engine.submit(back.data(), host.data(), bytes, Dir::to_device);
  engine.wait(t2);
  if (!engine.done(t1)) { std::printf("FAIL: ticket order\n"); ++failures; }
  int wrong = 0;
  Kokkos::parallel_reduce("compare", n, KOKKOS_LAMBDA(const std::size_t i, int& w) { w += dev(i) != back(i); }, wrong);
  if (wrong) { std::printf("FAIL: %d values differ after the round trip\n", wrong); ++failures; }
  const auto c = engine.take_counters();
  if (c.bytes_to_host != bytes || c.bytes_to_device != bytes) { std::printf("FAIL: byte counts\n"); ++failures; }
  std::printf("round trip of %.0f MiB: %.2f GB/s each way (engine busy %.4f s)\n", bytes / 1048576.0,
              2.0 * bytes / c.busy_seconds / 1e9, c.busy_seconds);

  // Overlap: compute alone, copies alone, both.
  const int iters = 20000;
  compute(work, iters);
  Kokkos::fence();
  Kokkos::Timer t;
  compute(work, iters);
  minilst::compat::fence("compute alone");
  const double t_compute = t.seconds();
  t.reset();
  engine.wait(engine.submit(host.data(), dev.data(), bytes, Dir::to_host));
  engine.wait(engine.submit(dev.data(), host.data(), bytes, Dir::to_device));
  const double t_copy = t.seconds();
  t.reset();
  const auto a = engine.submit(host.data(), dev.data(), bytes, Dir::to_host);
  const auto b = engine.submit(dev.data(), host.data(), bytes, Dir::to_device);
  compute(work, iters);
  minilst::compat::fence("compute with copies");
  engine.wait(a);
  engine.wait(b);
  const double t_both = t.seconds();
  const double hidden = (t_compute + t_copy - t_both) / std::min(t_compute, t_copy);
  std::printf("compute %.4f s, copies %.4f s, both %.4f s: %.0f%% of the shorter one hidden\n", t_compute, t_copy,
              t_both, 100 * hidden);
  if (hidden < 0.5) { std::printf("FAIL: copies do not overlap compute\n"); ++failures; }
  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("CUDA copy engine compiled against Kokkos %d.%d.%d, CUDA runtime %d.%d (not run: no GPU needed)\n",
                KOKKOS_VERSION / 10000, KOKKOS_VERSION / 100 % 100, KOKKOS_VERSION % 100, CUDART_VERSION / 1000,
                CUDART_VERSION % 1000 / 10);
    return 0;
  }
  Kokkos::ScopeGuard kokkos(argc, argv);
  return functional() ? 1 : 0;
}
