#include "memory/tracker.hpp"

#include <algorithm>

namespace minilst {

const char* category_name(MemCategory c) {
  static const char* names[kNumMemCategories] = {"weights",     "gradients", "optimizer",   "activations",
                                                 "workspace",   "comm",      "host_offload", "host_optimizer"};
  return names[int(c)];
}

long MemoryTracker::on_alloc(MemCategory c, std::size_t bytes) {
  const int i = int(c);
  current_[i] += bytes;
  high_[i] = std::max(high_[i], current_[i]);
  if (is_device(c)) {
    device_current_ += bytes;
    device_high_ = std::max(device_high_, device_current_);
  }
  return next_id_++;
}

void MemoryTracker::on_free(MemCategory c, std::size_t bytes) {
  const int i = int(c);
  current_[i] -= bytes;
  if (is_device(c)) device_current_ -= bytes;
}

void MemoryTracker::reset_high_water() {
  high_ = current_;
  device_high_ = device_current_;
}

}  // namespace minilst
