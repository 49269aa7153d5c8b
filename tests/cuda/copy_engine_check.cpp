// The CUDA copy engine (src/memory/cuda_copy_engine.*), which CPU-only CI cannot
// run: built against a CUDA Kokkos, this program compiles and links it.
// `--version` (the ctest) prints the Kokkos and CUDA versions without touching
// the GPU. Without arguments, on a GPU:
//   ordering  device -> pinned host -> device with no host fence or wait between
//             the steps: the first copy ordered after the kernel that fills the
//             source (submit), the second after the first (order_compute_after,
//             then submit), the comparing kernel after the second; bytes, counts;
//   duplex    a copy out and a copy in alone, then both at once (their streams
//             are independent: prints the time hidden);
//   overlap   a compute kernel on the default instance alone, the two copies
//             alone, and all at once (prints the three times and the hidden fraction).
#include <Kokkos_Core.hpp>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
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

double seconds_of(const std::function<void()>& work) {
  Kokkos::Timer t;
  work();
  return t.seconds();
}

// Time hidden when a and b run together, as a fraction of the shorter one.
double hidden(double a, double b, double both) { return (a + b - both) / std::min(a, b); }

int functional() {
  int failures = 0;
  const auto fail = [&](const char* what) {
    std::printf("FAIL: %s\n", what);
    ++failures;
  };
  const std::size_t n = std::size_t(64) << 20;  // 64 Mi floats = 256 MiB
  const std::size_t bytes = n * sizeof(float);
  Kokkos::View<float*> dev("dev", n), back("back", n), work("work", 1 << 24);
  Kokkos::View<float*, minilst::compat::HostPinnedSpace> host("host", n), host_in("host_in", n);
  minilst::CudaCopyEngine engine;

  // Ordering, device side only: no fence between the fill, the two copies and the comparison.
  Kokkos::parallel_for("fill", n, KOKKOS_LAMBDA(const std::size_t i) { dev(i) = float(i % 1000003); });
  const auto out = engine.submit(host.data(), dev.data(), bytes, Dir::to_host);
  engine.order_compute_after(out);  // the copy back reads what `out` writes
  const auto in = engine.submit(back.data(), host.data(), bytes, Dir::to_device);
  engine.order_compute_after(in);
  int wrong = 0;
  Kokkos::parallel_reduce("compare", n, KOKKOS_LAMBDA(const std::size_t i, int& w) { w += dev(i) != back(i); }, wrong);
  if (wrong) {
    std::printf("%d values differ after the round trip\n", wrong);
    fail("device-side ordering");
  }
  if (!engine.done(out) || !engine.done(in)) fail("tickets done after the compute ordered after them finished");
  const auto c = engine.take_counters();
  if (c.bytes_to_host != bytes || c.bytes_to_device != bytes) fail("byte counts");
  std::printf("round trip of %.0f MiB: %.2f GB/s per direction (engine busy %.4f s)\n", bytes / 1048576.0,
              2.0 * bytes / c.busy_seconds / 1e9, c.busy_seconds);

  // Both directions at once.
  const auto copy_out = [&] { return engine.submit(host.data(), dev.data(), bytes, Dir::to_host); };
  const auto copy_in = [&] { return engine.submit(back.data(), host_in.data(), bytes, Dir::to_device); };
  engine.wait(copy_out());  // warm
  const double t_out = seconds_of([&] { engine.wait(copy_out()); });
  const double t_in = seconds_of([&] { engine.wait(copy_in()); });
  const double t_duplex = seconds_of([&] {
    copy_out();
    copy_in();
    engine.wait_all();
  });
  std::printf("out %.4f s, in %.4f s, both %.4f s: %.0f%% of the shorter one hidden\n", t_out, t_in, t_duplex,
              100 * hidden(t_out, t_in, t_duplex));
  if (hidden(t_out, t_in, t_duplex) < 0.5) fail("the two directions do not overlap");

  // Overlap with compute.
  const int iters = 20000;
  compute(work, iters);
  minilst::compat::fence("warm");
  const double t_compute = seconds_of([&] {
    compute(work, iters);
    minilst::compat::fence("compute alone");
  });
  const double t_copies = t_duplex;
  const double t_all = seconds_of([&] {
    copy_out();
    copy_in();
    compute(work, iters);
    minilst::compat::fence("compute with copies");
    engine.wait_all();
  });
  std::printf("compute %.4f s, copies %.4f s, all %.4f s: %.0f%% of the shorter one hidden\n", t_compute, t_copies,
              t_all, 100 * hidden(t_compute, t_copies, t_all));
  if (hidden(t_compute, t_copies, t_all) < 0.5) fail("copies do not overlap compute");
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
