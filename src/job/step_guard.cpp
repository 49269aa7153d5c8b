#include "job/step_guard.hpp"

#include <algorithm>

namespace minilst {

StepGuard::StepGuard(const Deck& deck, MPI_Comm comm, int rank, int nranks, Watchdog& watchdog, double flops_per_rank)
    : deck_(deck), comm_(comm), nranks_(nranks), watchdog_(watchdog), flops_per_rank_(flops_per_rank),
      stopper_(deck.run.time_limit_s, rank) {}

double StepGuard::first_patience(const Deck& deck, int nranks, double flops_per_rank) {
  if (deck.run.watchdog_s > 0) return deck.run.watchdog_s;
  return nranks == 1 ? 0 : Watchdog::first_step_patience(flops_per_rank);
}

double StepGuard::patience() const {
  if (slowest_ == 0 || deck_.run.watchdog_s > 0 || nranks_ == 1) return first_patience(deck_, nranks_, flops_per_rank_);
  return Watchdog::step_patience(slowest_);
}

void StepGuard::start() { watchdog_.arm(patience(), "step 1"); }

std::string StepGuard::after_step(long step, double step_seconds) {
  slowest_ = std::max(slowest_, step_seconds);
  watchdog_.arm(patience(), "step " + std::to_string(step + 2));
  const std::string stop = stopper_.after_step(comm_, nranks_, step_seconds);  // the same on every rank
  const bool last = step + 1 == deck_.run.steps;
  return last ? "" : stop;
}

void StepGuard::arm_final_write() { watchdog_.arm(patience(), "the final write"); }

}  // namespace minilst
