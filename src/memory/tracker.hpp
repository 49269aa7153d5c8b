// Tracked allocation: every buffer miniLST allocates is counted in a category,
// with a high-water mark per category and for all device categories together.
//   weights, gradients, optimizer   parameters, their gradients, AdamW moments
//   activations                     tensors saved by the forward for the backward
//   workspace                       transient buffers of one kernel sequence
//   comm                            communication buffers
//   host_offload                    activations swapped to host memory (not device)
// The tracker can also record the allocation sequence (the input of a static
// memory plan): one event per alloc/free with a buffer id, label and size.
#pragma once

#include <Kokkos_Core.hpp>
#include <array>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace minilst {

enum class MemCategory : int { weights, gradients, optimizer, activations, workspace, comm, host_offload };
constexpr int kNumMemCategories = 7;
const char* category_name(MemCategory c);
inline bool is_device(MemCategory c) { return c != MemCategory::host_offload; }

struct MemEvent {
  bool alloc;  // false: free
  long id;
  MemCategory category;
  std::size_t bytes;
  std::string label;
};

class MemoryTracker {
 public:
  static MemoryTracker& instance();

  long on_alloc(MemCategory c, std::size_t bytes, const std::string& label);
  void on_free(long id, MemCategory c, std::size_t bytes, const std::string& label);

  std::size_t current(MemCategory c) const { return current_[int(c)]; }
  std::size_t high_water(MemCategory c) const { return high_[int(c)]; }
  std::size_t device_current() const { return device_current_; }
  std::size_t device_high_water() const { return device_high_; }
  void reset_high_water();  // high-water := current, for every category

  void start_trace() { trace_.clear(); tracing_ = true; }
  std::vector<MemEvent> stop_trace() { tracing_ = false; return std::move(trace_); }

  // Names of the scopes being run ("L3.fwd"), prefixed to buffer labels: stable
  // keys across steps, and labels Kokkos Tools can tell apart by layer.
  void push_scope(const std::string& name) { scopes_.push_back(name); }
  void pop_scope() { scopes_.pop_back(); }
  std::string scoped(const std::string& label) const {
    std::string s;
    for (const auto& n : scopes_) s += n + "/";
    return s + label;
  }

 private:
  std::vector<std::string> scopes_;
  std::array<std::size_t, kNumMemCategories> current_{}, high_{};
  std::size_t device_current_ = 0, device_high_ = 0;
  long next_id_ = 0;
  bool tracing_ = false;
  std::vector<MemEvent> trace_;
};

// A buffer that is fully overwritten before it is read: allocated without the
// zero-fill (Tracked(uninitialized, label, category, extents...)).
struct Uninitialized {};
constexpr Uninitialized uninitialized{};

// The step arena (step_arena.hpp), as Tracked sees it: memory for a request, or
// nullptr (then Tracked allocates, and the allocation is counted).
void* arena_take(const std::string& key, MemCategory category, std::size_t bytes, long id);
void arena_give_back(long id);
void arena_count_allocation();

// Owns one Kokkos View and keeps its bytes counted in a category while it lives.
// Move-only; the View's label is the buffer's name in its scope ("L3.fwd/q",
// what Kokkos Tools show). Buffers of a step come from the step arena when a
// plan exists (an unmanaged View into it), else from their own allocation.
template <class ViewT>
class Tracked {
 public:
  Tracked() = default;
  template <class... Extents>
  Tracked(const std::string& label, MemCategory category, Extents... extents) {
    init(true, label, category, extents...);
  }
  template <class... Extents>
  Tracked(Uninitialized, const std::string& label, MemCategory category, Extents... extents) {
    init(false, label, category, extents...);
  }
  ~Tracked() { reset(); }
  Tracked(Tracked&& other) noexcept { *this = std::move(other); }
  Tracked& operator=(Tracked&& other) noexcept {
    if (this != &other) {
      reset();
      view_ = std::move(other.view_);
      category_ = other.category_;
      bytes_ = std::exchange(other.bytes_, 0);
      id_ = std::exchange(other.id_, -1);
      other.view_ = ViewT();
    }
    return *this;
  }
  Tracked(const Tracked&) = delete;
  Tracked& operator=(const Tracked&) = delete;

  const ViewT& view() const { return view_; }
  std::size_t bytes() const { return bytes_; }
  void reset() {
    if (id_ >= 0) {
      arena_give_back(id_);
      MemoryTracker::instance().on_free(id_, category_, bytes_, view_.label());
    }
    view_ = ViewT();
    bytes_ = 0;
    id_ = -1;
  }

 private:
  template <class... Extents>
  void init(bool zero, const std::string& label, MemCategory category, Extents... extents) {
    using V = typename ViewT::value_type;
    auto& tracker = MemoryTracker::instance();
    const std::string name = tracker.scoped(label);
    category_ = category;
    bytes_ = (std::size_t(extents) * ... * sizeof(V));
    id_ = tracker.on_alloc(category, bytes_, name);
    if (void* p = arena_take(name, category, bytes_, id_)) {
      view_ = ViewT(static_cast<V*>(p), extents...);
      if (zero) Kokkos::deep_copy(typename ViewT::execution_space(), view_, V(0));
    } else {
      view_ = zero ? ViewT(name, extents...) : ViewT(Kokkos::view_alloc(Kokkos::WithoutInitializing, name), extents...);
      arena_count_allocation();
    }
  }

  ViewT view_;
  MemCategory category_ = MemCategory::workspace;
  std::size_t bytes_ = 0;
  long id_ = -1;
};

}  // namespace minilst
