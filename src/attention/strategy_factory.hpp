// Which attention strategy each rank runs, decided in one place from its geometry
// (attention_geometry.hpp, which also names it): local, Ulysses over local or over
// a ring (the hybrid), or the ring alone.
#pragma once

#include "attention/attention_geometry.hpp"
#include "attention/attention_strategy.hpp"
#include "core/phases.hpp"
#include "parallel/parallel_setup.hpp"

namespace minilst {

// The run's strategies, on the communicators of `par` (which must outlive them).
template <class T>
AttentionFactory<T> make_attention_factory(const AttentionGeometry& g, ParallelSetup& par, const KernelChoice& kernels,
                                           PhaseTimers* timers);

}  // namespace minilst
