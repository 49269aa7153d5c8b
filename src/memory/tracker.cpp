#include "memory/tracker.hpp"

#include <algorithm>

namespace minilst {

const char* category_name(MemCategory c) {
  static const char* names[kNumMemCategories] = {"weights",     "gradients", "optimizer",   "activations",
                                                 "workspace",   "comm",      "host_offload"};
  return names[int(c)];
}

MemoryTracker& MemoryTracker::instance() {
  static MemoryTracker tracker;
  return tracker;
}

long MemoryTracker::on_alloc(MemCategory c, std::size_t bytes, const std::string& label) {
  const int i = int(c);
  current_[i] += bytes;
  high_[i] = std::max(high_[i], current_[i]);
  if (is_device(c)) {
    device_current_ += bytes;
    device_high_ = std::max(device_high_, device_current_);
  }
  const long id = next_id_++;
  if (tracing_) trace_.push_back({true, id, c, bytes, label});
  return id;
}

void MemoryTracker::on_free(long id, MemCategory c, std::size_t bytes, const std::string& label) {
  const int i = int(c);
  current_[i] -= bytes;
  if (is_device(c)) device_current_ -= bytes;
  if (tracing_) trace_.push_back({false, id, c, bytes, label});
}

void MemoryTracker::reset_high_water() {
  high_ = current_;
  device_high_ = device_current_;
}

}  // namespace minilst
