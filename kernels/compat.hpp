// Kokkos version differences, kept in one place (Kokkos 3.4 on Debian, 4.x on clusters).
#pragma once

#include <Kokkos_Core.hpp>
#include <string>

namespace minilst::compat {

// Math functions: Kokkos::Experimental:: in 3.4-3.6, Kokkos:: from 3.7; the
// Experimental aliases are gone in 4.3.
#if KOKKOS_VERSION >= 30700
using Kokkos::exp;
using Kokkos::log;
using Kokkos::sqrt;
using Kokkos::cos;
using Kokkos::sin;
using Kokkos::pow;
using Kokkos::fabs;
using Kokkos::log1p;
#else
using Kokkos::Experimental::exp;
using Kokkos::Experimental::log;
using Kokkos::Experimental::sqrt;
using Kokkos::Experimental::cos;
using Kokkos::Experimental::sin;
using Kokkos::Experimental::pow;
using Kokkos::Experimental::fabs;
using Kokkos::Experimental::log1p;
#endif

// Waits for the compute instance (the default execution space instance), and
// only for it: a global Kokkos::fence() would also wait for the copy engine's
// instance (src/memory/) and erase the overlap of transfers with compute.
// Labelled instance fences exist from Kokkos 3.6.
inline void fence(const std::string& label) {
#if KOKKOS_VERSION >= 30600
  Kokkos::DefaultExecutionSpace().fence(label);
#else
  (void)label;
  Kokkos::DefaultExecutionSpace().fence();
#endif
}

// Host memory the device can copy to and from asynchronously: pinned memory on
// CUDA builds (SharedHostPinnedSpace from Kokkos 4.0, CudaHostPinnedSpace before),
// plain HostSpace on host builds.
#if KOKKOS_VERSION >= 40000
using HostPinnedSpace = Kokkos::SharedHostPinnedSpace;
#elif defined(KOKKOS_ENABLE_CUDA)
using HostPinnedSpace = Kokkos::CudaHostPinnedSpace;
#else
using HostPinnedSpace = Kokkos::HostSpace;
#endif

// Scoped profiling region (Kokkos::Profiling::ScopedRegion is 4.1+; push/pop are in 3.4).
class ScopedRegion {
 public:
  explicit ScopedRegion(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~ScopedRegion() { Kokkos::Profiling::popRegion(); }
  ScopedRegion(const ScopedRegion&) = delete;
  ScopedRegion& operator=(const ScopedRegion&) = delete;
};

// Run metadata that Kokkos Tools (and Adiak/Caliper through them) record.
inline void declare_metadata(const std::string& key, const std::string& value) {
  Kokkos::Tools::declareMetadata(key, value);
}

}  // namespace minilst::compat
