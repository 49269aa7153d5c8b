// The build's copy engine: CUDA streams on CUDA builds (memory/cuda_copy_engine.hpp),
// a worker thread otherwise (memory/host_copy_engine.hpp).
#pragma once

#include <memory>

#include "memory/copy_engine.hpp"

namespace minilst {

// bandwidth_gbs > 0 caps the worker thread's rate (GB/s = 1e9 bytes/s), to model a
// PCIe or NVLink-C2C link on a machine without one; CUDA builds refuse a cap (their
// link is real). Throws std::invalid_argument on a refused cap.
std::unique_ptr<CopyEngine> make_copy_engine(double bandwidth_gbs);

// Whether this build's engine can model a bandwidth cap (host builds).
bool copy_engine_supports_bandwidth_cap();

}  // namespace minilst
