// Plain host threads for set-up work outside Kokkos (drawing initial values, filling
// benchmark operands), sized to the cores this process may run on.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <system_error>
#include <thread>
#include <vector>
#ifdef __linux__
#include <sched.h>
#endif

namespace minilst {

// The cores this process may run on: its affinity mask where the OS has one (a batch
// job's cgroup, a launcher's binding), else what the machine reports; at least 1.
inline int allowed_cores() {
#ifdef __linux__
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0 && CPU_COUNT(&mask) > 0) return CPU_COUNT(&mask);
#endif
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? int(n) : 1;
}

// f(i) for i in [0, n), on up to allowed_cores() threads (this one included), each taking
// the next i as it finishes. f must not throw; the order of the calls is unspecified.
template <class F>
void on_host_cores(std::size_t n, F&& f) {
  const std::size_t threads = std::min<std::size_t>(n, std::size_t(allowed_cores()));
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) f(i);
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {  // no more threads to be had (a pids limit): fewer do it
      break;
    }
  }
  worker();
  for (auto& t : pool) t.join();
}

}  // namespace minilst
