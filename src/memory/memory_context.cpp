#include "memory/memory_context.hpp"

namespace minilst {

namespace {
CountingMemory* g_counting = nullptr;  // the innermost counting context, or none (the run's memory)
}  // namespace

MemoryTracker& MemoryTracker::instance() {
  static MemoryTracker process;
  return g_counting ? g_counting->tracker() : process;
}

StepArena& StepArena::instance() {
  static StepArena process;
  return g_counting ? g_counting->recorder() : process;
}

bool counting_only() { return g_counting != nullptr; }

void* arena_take(const std::string& key, MemCategory category, std::size_t bytes, long id) {
  return StepArena::instance().take(key, category, bytes, id);
}
void arena_give_back(long id) { StepArena::instance().give_back(id); }
void arena_count_allocation() { StepArena::instance().count_allocation(); }

CountingMemory::CountingMemory() : previous_(g_counting) { g_counting = this; }
CountingMemory::~CountingMemory() { g_counting = previous_; }

}  // namespace minilst
