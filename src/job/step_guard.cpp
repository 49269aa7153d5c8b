#include "job/step_guard.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

namespace minilst {

namespace {
// The patience of step 1 on several ranks.
double step_one_patience(const Deck& deck, double flops_per_rank) {
  return deck.run.watchdog_s > 0 ? deck.run.watchdog_s : Watchdog::first_step_patience(flops_per_rank);
}
}  // namespace

void test_stall(const char* where, int rank) {
  const char* spec = std::getenv("MINILST_TEST_STALL");  // "<where>:<seconds>[,<where>:<seconds>]..."
  if (rank != 0 || !spec) return;
  std::istringstream list(spec);
  for (std::string item; std::getline(list, item, ',');) {
    const auto colon = item.find(':');
    if (colon == std::string::npos || item.substr(0, colon) != where) continue;
    const double seconds = std::atof(item.c_str() + colon + 1);
    if (seconds <= 0) continue;
    std::fprintf(stderr, "MINILST_TEST_STALL (a test hook): rank 0 pauses %.1f s at the %s\n", seconds, where);
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
}

StepGuard::StepGuard(const Deck& deck, MPI_Comm comm, int rank, int nranks, Watchdog& watchdog, double flops_per_rank)
    : deck_(deck), comm_(comm), rank_(rank), nranks_(nranks), watchdog_(watchdog), flops_per_rank_(flops_per_rank),
      stopper_(deck.run.time_limit_s, rank) {
  test_stall("setup", rank_);  // constructed inside the set-up, under its patience
}

double StepGuard::first_patience(const Deck& deck, int nranks, double flops_per_rank) {
  if (nranks == 1) return 0;
  return Watchdog::long_wait_patience(step_one_patience(deck, flops_per_rank));
}

double StepGuard::step_patience() const {
  if (nranks_ == 1) return 0;
  if (deck_.run.watchdog_s > 0) return deck_.run.watchdog_s;
  return slowest_ == 0 ? Watchdog::first_step_patience(flops_per_rank_) : Watchdog::step_patience(slowest_);
}

void StepGuard::start() { watchdog_.arm(step_patience(), "step 1"); }

std::string StepGuard::after_step(long step, double step_seconds) {
  slowest_ = std::max(slowest_, step_seconds);
  const bool last = step + 1 == deck_.run.steps;
  if (last)  // this rank's steps are done: what follows is the write, not another step
    arm_write("the final write (rank 0 writing the results)");
  else
    watchdog_.arm(step_patience(), "step " + std::to_string(step + 2));
  const std::string stop = stopper_.after_step(comm_, nranks_, step_seconds);  // the same on every rank
  return last ? "" : stop;
}

void StepGuard::arm_write(const std::string& what) {
  const double step = step_patience();
  watchdog_.set_finishing_patience(step);
  watchdog_.arm(nranks_ == 1 ? 0 : Watchdog::long_wait_patience(step), what,
                "rank 0's file system stalls, or a rank is stopped");
}

void StepGuard::arm_final_write() {
  arm_write("the final write (rank 0 writing the results)");
  test_stall("final_write", rank_);
}

}  // namespace minilst
