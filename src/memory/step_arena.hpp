// The step's memory at run time (memory.planner: plan). A step asks for its
// buffers in the same order every time (activations, workspace, communication
// buffers: the categories that live within a step). The first step allocates
// them one by one, as without a plan, and records every request: a stable key
// (the scope and the buffer's name, e.g. "L3.fwd/mlp_gate"), its size, when it is
// allocated and freed, and the layer segments (planner.hpp plans each layer block
// once). The plan gives every request an offset in one arena, allocated once per
// memory space; every later step takes its buffers from the arena in order and
// allocates nothing. A step whose requests differ from the record allocates what
// no longer matches, is recorded again, and planned again at its end; the
// allocation count in the metrics shows it. Where the change is known between
// steps (alpha auto), forget_plan() drops the arena first.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/types.hpp"
#include "memory/planner.hpp"
#include "memory/tracker.hpp"

namespace minilst {

class StepArena {
 public:
  static StepArena& instance();  // the current memory context's (memory_context.hpp)

  // Planning on or off (off: every buffer is its own allocation, as before).
  void configure(bool plan, PlanSolver solver);
  bool planning() const { return plan_; }

  void begin_step();
  void end_step();  // plans after a recorded step; checks every step buffer was freed

  // Tracked asks here for a buffer of `bytes` under `key`, tracker id `id`:
  // the arena's memory, or nullptr (allocate it yourself; counted).
  void* take(const std::string& key, MemCategory category, std::size_t bytes, long id);
  void give_back(long id);
  void count_allocation() { ++allocations_; }

  // Layer segments (MemScope marks them).
  void begin_segment(const std::string& kind);
  void end_segment();

  // Reports.
  std::uint64_t allocations_in_step() const { return step_allocations_; }  // of the last finished step
  std::uint64_t arena_bytes() const { return std::uint64_t(arena_.extent(0)); }
  const ArenaPlan& plan() const { return plan_result_; }
  std::uint64_t unplanned_peak_bytes() const { return unplanned_peak_; }
  double plan_seconds() const { return plan_seconds_; }
  // The last step's requests and layer segments, as recorded (the memory model's replay reads them).
  const std::vector<TraceBuffer>& recorded_trace() const { return trace_; }
  const std::vector<TraceSegment>& recorded_segments() const { return segments_; }
  int plans_made() const { return plans_made_; }
  std::string solver_name() const;
  void reset();  // back to no plan, no arena (tests)
  // Between steps: the next step records afresh, without the arena, and is planned at its
  // end. For a change of the step's buffers known in advance (alpha auto's new alpha): a
  // step that diverged from the plan mid-way would hold the old arena beside its own.
  void forget_plan();

 private:
  static bool in_step_category(MemCategory c) {
    return c == MemCategory::activations || c == MemCategory::workspace || c == MemCategory::comm;
  }
  void sample_footprint();

  bool plan_ = false;
  PlanSolver solver_ = PlanSolver::greedy;
  bool in_step_ = false, replaying_ = false, diverged_ = false;
  Kokkos::View<unsigned char*, MemSpace> arena_;
  ArenaPlan plan_result_;
  std::vector<TraceBuffer> planned_;            // the requests the plan serves, in order
  std::vector<TraceBuffer> trace_;              // this step's requests
  std::vector<TraceSegment> segments_;
  std::unordered_map<long, std::size_t> open_;  // tracker id -> trace index
  int open_segment_ = -1;
  std::int64_t clock_ = 0;                      // events so far in this step
  std::uint64_t allocations_ = 0, step_allocations_ = 0;
  std::uint64_t footprint_start_ = 0, footprint_peak_ = 0, unplanned_peak_ = 0;
  double plan_seconds_ = 0;
  int plans_made_ = 0;
};

// A named scope for buffer keys and labels ("L3.fwd/q"); a segment scope also
// marks a layer block for the planner.
class MemScope {
 public:
  MemScope(const std::string& name, const char* segment_kind = nullptr);
  ~MemScope();
  MemScope(const MemScope&) = delete;
  MemScope& operator=(const MemScope&) = delete;

 private:
  bool segment_;
};

}  // namespace minilst
