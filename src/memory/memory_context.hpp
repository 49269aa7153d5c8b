// Where Tracked buffers go. A run allocates in the process's memory context: its
// tracker counts every buffer, its step arena records and serves the step's
// buffers. `minilst plan` and the memory model replay a step's allocation sequence
// in a CountingMemory instead: the same code asks for the same buffers in the same
// order, and they are counted and recorded but never made (each is a View with
// its extents and no data). So a buffer's size is written once, where the code
// allocates it, and the prediction is the replay's tracker and trace.
//   { CountingMemory counting;  ...replay...;  counting.tracker().high_water(c) }
#pragma once

#include "memory/step_arena.hpp"
#include "memory/tracker.hpp"

namespace minilst {

class CountingMemory {
 public:
  CountingMemory();   // makes itself the current context (nests)
  ~CountingMemory();  // restores the previous one
  CountingMemory(const CountingMemory&) = delete;
  CountingMemory& operator=(const CountingMemory&) = delete;

  MemoryTracker& tracker() { return tracker_; }
  StepArena& recorder() { return recorder_; }  // records the step's trace; plans nothing

 private:
  MemoryTracker tracker_;
  StepArena recorder_;
  CountingMemory* previous_;
};

}  // namespace minilst
