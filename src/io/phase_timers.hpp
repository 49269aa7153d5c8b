// Named phase timers: seconds per phase, accumulated over one step.
//   ScopedPhase phase(timers, "attention");   // fence, push region ... fence, pop region, add
// The execution space is fenced at both ends, so asynchronous kernels are
// charged to the phase that launched them. Phases may nest (attention inside
// forward); each accumulates its own wall time. Each phase is also a Kokkos
// profiling region, so Kokkos Tools show the same names.
#pragma once

#include <Kokkos_Core.hpp>
#include <map>
#include <string>

#include "kernels/compat.hpp"

namespace minilst {

class PhaseTimers {
 public:
  void add(const std::string& phase, double seconds) { seconds_[phase] += seconds; }
  double get(const std::string& phase) const {
    const auto it = seconds_.find(phase);
    return it == seconds_.end() ? 0.0 : it->second;
  }
  void clear() { seconds_.clear(); }
  const std::map<std::string, double>& all() const { return seconds_; }

 private:
  std::map<std::string, double> seconds_;
};

class ScopedPhase {
 public:
  ScopedPhase(PhaseTimers* timers, std::string phase) : timers_(timers), phase_(std::move(phase)) {
    compat::fence("before " + phase_);
    Kokkos::Profiling::pushRegion(phase_);
    timer_.reset();
  }
  ~ScopedPhase() {
    compat::fence("end of " + phase_);
    if (timers_) timers_->add(phase_, timer_.seconds());
    Kokkos::Profiling::popRegion();
  }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseTimers* timers_;
  std::string phase_;
  Kokkos::Timer timer_;
};

}  // namespace minilst
