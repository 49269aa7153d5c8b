// Tracked allocation: every buffer miniLST allocates is counted in a category,
// with a high-water mark per category and for all device categories together.
//   weights, gradients, optimizer   parameters, their gradients, AdamW moments
//   activations                     tensors saved by the forward for the backward
//   workspace                       transient buffers of one kernel sequence
//   comm                            communication buffers
//   host_offload                    activations swapped to host memory (not device)
//   host_optimizer                  optimizer offload: AdamW states, master weights, the
//                                   gradient shard and their staging in host memory (not device)
// Where a Tracked buffer goes is the current memory context (memory_context.hpp):
// the process's memory when a run allocates, or a counting context when
// `minilst plan` replays a step's allocations (counted and recorded, never made).
#pragma once

#include <Kokkos_Core.hpp>
#include <array>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace minilst {

enum class MemCategory : int {
  weights, gradients, optimizer, activations, workspace, comm, host_offload, host_optimizer
};
constexpr int kNumMemCategories = 8;
const char* category_name(MemCategory c);
inline bool is_device(MemCategory c) { return c != MemCategory::host_offload && c != MemCategory::host_optimizer; }

class MemoryTracker {
 public:
  static MemoryTracker& instance();  // the current memory context's

  long on_alloc(MemCategory c, std::size_t bytes);  // returns the buffer's id
  void on_free(MemCategory c, std::size_t bytes);

  std::size_t current(MemCategory c) const { return current_[int(c)]; }
  std::size_t high_water(MemCategory c) const { return high_[int(c)]; }
  std::size_t device_current() const { return device_current_; }
  std::size_t device_high_water() const { return device_high_; }
  void reset_high_water();  // high-water := current, for every category

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
};

// A buffer that is fully overwritten before it is read: allocated without the
// zero-fill (Tracked(uninitialized, label, category, extents...)).
struct Uninitialized {};
constexpr Uninitialized uninitialized{};

// The current memory context (memory_context.hpp), as Tracked sees it. arena_take:
// memory for a request from the step arena, or nullptr (then Tracked allocates, and
// the allocation is counted). counting_only: requests are counted, never allocated
// (the buffer is a shape without memory: a View of the right extents whose data is null).
void* arena_take(const std::string& key, MemCategory category, std::size_t bytes, long id);
void arena_give_back(long id);
void arena_count_allocation();
bool counting_only();

// Owns one Kokkos View and keeps its bytes counted in a category while it lives.
// Move-only; the View's label is the buffer's name in its scope ("L3.fwd/q",
// what Kokkos Tools show). Buffers of a step come from the step arena when a
// plan exists (an unmanaged View into it), else from their own allocation; in a
// counting context, from nowhere (the View has its extents and no data).
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
      MemoryTracker::instance().on_free(category_, bytes_);
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
    id_ = tracker.on_alloc(category, bytes_);
    void* p = arena_take(name, category, bytes_, id_);
    if (counting_only()) {
      view_ = ViewT(static_cast<V*>(nullptr), extents...);
    } else if (p) {
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
