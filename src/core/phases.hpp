// The phases a step is timed in, as named constants (a misspelt phase does not
// compile), and the timers that accumulate them over one step.
//   ScopedPhase phase(timers, Phase::attention);   // fence, push region ... fence, pop region, add
// The execution space is fenced at both ends, so asynchronous kernels are
// charged to the phase that launched them. Phases may nest (attention inside
// forward); each accumulates its own wall time. Each phase is also a Kokkos
// profiling region, so Kokkos Tools show the same names. A null PhaseTimers
// times nothing (no fence, no region): what `minilst plan`'s replay of a step uses.
#pragma once

#include <Kokkos_Core.hpp>
#include <array>
#include <string>

#include "core/names.hpp"
#include "kernels/compat.hpp"

namespace minilst {

// In the order the metrics file, the summary and `minilst plan` list them: the step, its parts as a
// reader follows them (attention and the waits inside it, the blocks, recompute, the copy engine,
// the model states' collectives), AdamW. A new phase is one line here and one in the table below.
enum class Phase {
  step,              // the whole optimizer step (without the tensor dump)
  forward,           // embedding, layers, LM head + loss (whose backward is fused in it)
  backward,          // the layers' backward, the embedding's
  attention,         // the attention strategy, forward and backward (communication included)
  alltoall,          // Ulysses' all-to-alls (inside attention)
  ring_wait,         // waiting for ring transfers (inside attention)
  tensor_comm,       // tensor parallelism: the sequence's all-gathers and reduce-scatters around each block
  mlp,               // the MLP block, forward and backward
  lm_head,           // final norm, LM head and cross-entropy, forward and backward, in chunks
  recompute,         // checkpointing's forward redone, offload's token rows
  offload_wait,      // waiting for the copy engine
  prefetch_wait,     // ... the part of it in the backward
  copy_engine_busy,  // the copy engine's busy time (concurrent with the rest)
  grad_reduce,       // waiting for gradient reductions, wherever they are (ZeRO 2, 3: inside the backward)
  grad_reduce_overlap,  // the time posted reduce-scatters had in the background before their wait
  param_gather,      // waiting for weight all-gathers (ZeRO 3: inside forward and backward; 1, 2: after AdamW)
  param_gather_overlap, // the time posted gathers had in the background before their wait
  comm,              // after the micro-steps: the gradient's reduction over every rank (all-reduce, or the last reduce-scatters)
  optimizer,         // AdamW
};
template <>
struct EnumNames<Phase> {
  // std::array's count deduced: a new phase is its line alone
  static constexpr std::array table{
      std::pair{Phase::step, "step"},
      std::pair{Phase::forward, "forward"},
      std::pair{Phase::backward, "backward"},
      std::pair{Phase::attention, "attention"},
      std::pair{Phase::alltoall, "alltoall"},
      std::pair{Phase::ring_wait, "ring_wait"},
      std::pair{Phase::tensor_comm, "tensor_comm"},
      std::pair{Phase::mlp, "mlp"},
      std::pair{Phase::lm_head, "lm_head"},
      std::pair{Phase::recompute, "recompute"},
      std::pair{Phase::offload_wait, "offload_wait"},
      std::pair{Phase::prefetch_wait, "prefetch_wait"},
      std::pair{Phase::copy_engine_busy, "copy_engine_busy"},
      std::pair{Phase::grad_reduce, "grad_reduce"},
      std::pair{Phase::grad_reduce_overlap, "grad_reduce_overlap"},
      std::pair{Phase::param_gather, "param_gather"},
      std::pair{Phase::param_gather_overlap, "param_gather_overlap"},
      std::pair{Phase::comm, "comm"},
      std::pair{Phase::optimizer, "optimizer"},
  };
};
constexpr int kNumPhases = int(EnumNames<Phase>::table.size());
static_assert(numbered_in_table_order<Phase>(), "the table lists the phases in the enum's order");

// Seconds per phase (of one step): what a run measures and what the time model predicts.
using PhaseSeconds = EnumMap<Phase, double>;

// Seconds per phase over one step.
class PhaseTimers {
 public:
  void add(Phase p, double seconds) { seconds_[p] += seconds; }
  double get(Phase p) const { return seconds_[p]; }
  void clear() { seconds_ = PhaseSeconds{}; }
  const PhaseSeconds& seconds() const { return seconds_; }

 private:
  PhaseSeconds seconds_{};
};

class ScopedPhase {
 public:
  ScopedPhase(PhaseTimers* timers, Phase phase) : timers_(timers), phase_(phase) {
    if (!timers_) return;
    compat::fence("before " + name_of(phase_));
    Kokkos::Profiling::pushRegion(name_of(phase_));
    timer_.reset();
  }
  ~ScopedPhase() {
    if (!timers_) return;
    compat::fence("end of " + name_of(phase_));
    timers_->add(phase_, timer_.seconds());
    Kokkos::Profiling::popRegion();
  }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseTimers* timers_;
  Phase phase_;
  Kokkos::Timer timer_;
};

}  // namespace minilst
