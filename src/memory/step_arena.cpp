#include "memory/step_arena.hpp"

#include <malloc.h>

#include <algorithm>
#include <stdexcept>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace minilst {

namespace {
constexpr std::uint64_t kAlignment = kArenaAlignment;

// Bytes the allocator behind the step's buffers holds now (glibc's heap and
// mappings on host builds; the device's used memory on CUDA builds).
std::uint64_t allocator_bytes() {
#ifdef KOKKOS_ENABLE_CUDA
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
  return total_b - free_b;
#elif defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
  const auto m = mallinfo2();
  return std::uint64_t(m.uordblks) + std::uint64_t(m.hblkhd);
#else
  return 0;
#endif
}
}  // namespace

std::string StepArena::solver_name() const {
  if (solver_ == PlanSolver::greedy) return "greedy";
  return exact_solver_available() ? "exact (GLPK)" : "exact (GLPK not built: greedy)";
}

void StepArena::configure(bool plan, PlanSolver solver) {
  reset();
  plan_ = plan;
  solver_ = solver;
}

void StepArena::reset() {
  arena_ = Kokkos::View<unsigned char*, MemSpace>();
  plan_result_ = ArenaPlan();
  planned_.clear();
  trace_.clear();
  segments_.clear();
  open_.clear();
  in_step_ = replaying_ = diverged_ = false;
  plans_made_ = 0;
}

void StepArena::forget_plan() {
  if (in_step_) throw std::logic_error("step arena: the plan can be dropped between steps only");
  arena_ = Kokkos::View<unsigned char*, MemSpace>();
  planned_.clear();
}

void StepArena::begin_step() {
  in_step_ = true;
  replaying_ = plan_ && !planned_.empty();
  diverged_ = false;
  trace_.clear();
  segments_.clear();
  open_.clear();
  open_segment_ = -1;
  clock_ = 0;
  allocations_ = 0;
  footprint_peak_ = 0;
  sample_footprint();
  footprint_start_ = footprint_peak_;
}

// The allocator's footprint net of host-memory buffers (activation and optimizer
// offload: on host builds they share the heap; they are not step buffers).
void StepArena::sample_footprint() {
  if (counting_only()) return;  // a replay allocates nothing
  std::uint64_t bytes = allocator_bytes();
#ifndef KOKKOS_ENABLE_CUDA
  const auto& tracker = MemoryTracker::instance();
  const std::uint64_t host = tracker.current(MemCategory::host_offload) + tracker.current(MemCategory::host_optimizer);
  bytes -= std::min<std::uint64_t>(bytes, host);
#endif
  footprint_peak_ = std::max(footprint_peak_, bytes);
}

void* StepArena::take(const std::string& key, MemCategory category, std::size_t bytes, long id) {
  if (!in_step_ || !in_step_category(category)) return nullptr;
  const std::size_t n = trace_.size();
  trace_.push_back({key, bytes, clock_++, -1, open_segment_});
  open_[id] = n;
  if (!plan_) return nullptr;
  if (replaying_ && !diverged_) {
    if (n < planned_.size() && planned_[n].key == key && planned_[n].bytes == bytes)
      return arena_.data() + plan_result_.offsets[n];
    diverged_ = true;  // from here on this step allocates, and is planned again at its end
  }
  return nullptr;
}

void StepArena::give_back(long id) {
  if (!in_step_) return;
  const auto it = open_.find(id);
  if (it == open_.end()) return;  // allocated before the step (or not a step buffer)
  if (!replaying_ || diverged_) sample_footprint();  // a peak is just before a free
  auto& b = trace_[it->second];
  b.end = clock_++;
  if (b.segment != open_segment_) b.segment = -1;  // outlived the segment it was made in
  open_.erase(it);
}

void StepArena::begin_segment(const std::string& kind) {
  if (!in_step_) return;
  open_segment_ = int(segments_.size());
  segments_.push_back({kind, clock_++, 0});
}

void StepArena::end_segment() {
  if (!in_step_ || open_segment_ < 0) return;
  segments_[open_segment_].end = clock_++;
  // Buffers made in the segment and still alive belong to the step, not the segment.
  for (const auto& [id, n] : open_)
    if (trace_[n].segment == open_segment_) trace_[n].segment = -1;
  open_segment_ = -1;
}

void StepArena::end_step() {
  if (!in_step_) return;
  in_step_ = false;
  step_allocations_ = allocations_;
  if (!open_.empty())
    throw std::logic_error("step arena: " + std::to_string(open_.size()) + " buffer(s) of the step outlive it (first: " +
                           trace_[open_.begin()->second].key + ")");
  if (!plan_ || (replaying_ && !diverged_)) return;
  // A recorded step: plan it and allocate the arena (the step's buffers are all freed).
  unplanned_peak_ = footprint_peak_ - std::min(footprint_peak_, footprint_start_);
  Kokkos::Timer timer;
  plan_result_ = plan_step(trace_, segments_, solver_, kAlignment);
  plan_seconds_ = timer.seconds();
  planned_ = trace_;
  arena_ = Kokkos::View<unsigned char*, MemSpace>();
  arena_ = Kokkos::View<unsigned char*, MemSpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "step_arena"),
                                                  std::max<std::uint64_t>(plan_result_.arena_bytes, kAlignment));
  ++plans_made_;
}

MemScope::MemScope(const std::string& name, const char* segment_kind) : segment_(segment_kind != nullptr) {
  MemoryTracker::instance().push_scope(name);
  if (segment_) StepArena::instance().begin_segment(segment_kind);
}

MemScope::~MemScope() {
  if (segment_) StepArena::instance().end_segment();
  MemoryTracker::instance().pop_scope();
}

}  // namespace minilst
