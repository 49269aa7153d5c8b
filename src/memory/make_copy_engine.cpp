#include "memory/make_copy_engine.hpp"

#include <Kokkos_Core.hpp>
#include <stdexcept>

#include "memory/cuda_copy_engine.hpp"
#include "memory/host_copy_engine.hpp"

namespace minilst {

bool copy_engine_supports_bandwidth_cap() {
#ifdef KOKKOS_ENABLE_CUDA
  return false;
#else
  return true;
#endif
}

std::unique_ptr<CopyEngine> make_copy_engine(double bandwidth_gbs) {
  if (bandwidth_gbs > 0 && !copy_engine_supports_bandwidth_cap())
    throw std::invalid_argument("memory.offload_bandwidth_gbs: a bandwidth cap is modelled by the host copy engine "
                                "only; this CUDA build copies over the real link (set 0)");
#ifdef KOKKOS_ENABLE_CUDA
  return std::make_unique<CudaCopyEngine>();
#else
  return std::make_unique<HostCopyEngine>(bandwidth_gbs);
#endif
}

}  // namespace minilst
