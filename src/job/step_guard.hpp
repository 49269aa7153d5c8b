// The batch-job duties around the step loop: how long the watchdog waits for each
// step (run.watchdog_s, or automatic: none on one rank, where no peer can stall it;
// a generous first step; then 10 x the slowest step, at least 60 s), and whether the
// ranks stop after this step (signals, run.time_limit_s, the Slurm job's end: one
// small all-reduce, the same verdict on every rank).
#pragma once

#include <mpi.h>

#include <string>

#include "io/deck.hpp"
#include "job/stop.hpp"
#include "job/watchdog.hpp"

namespace minilst {

class StepGuard {
 public:
  // The time budget starts now. flops_per_rank: one step's model FLOPs on a rank.
  StepGuard(const Deck& deck, MPI_Comm comm, int rank, int nranks, Watchdog& watchdog, double flops_per_rank);

  // The watchdog's patience before the first step (the set-up's too).
  static double first_patience(const Deck& deck, int nranks, double flops_per_rank);
  // Arms the watchdog for the first step.
  void start();

  // Collective, after every step: the watchdog armed for the next step; why the run stops
  // after this step ("" to go on; always "" after the last step).
  std::string after_step(long step, double step_seconds);
  // Before the final write: the watchdog's patience for it.
  void arm_final_write();

 private:
  double patience() const;

  const Deck& deck_;
  MPI_Comm comm_;
  int nranks_;
  Watchdog& watchdog_;
  double flops_per_rank_, slowest_ = 0;
  StopControl stopper_;
};

}  // namespace minilst
