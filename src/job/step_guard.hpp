// The batch-job duties around the step loop: how long the watchdog waits for each
// part of the run, and whether the ranks stop after this step (signals,
// run.time_limit_s, the Slurm job's end: one small all-reduce, the same verdict on
// every rank).
//   patience    one rank: none, whatever the deck says (no peer can stall it)
//   set-up      max(10 min, 10 x the first step's patience): the peak measurement, the
//               model's allocations and first touch, NCCL's start
//   each step   run.watchdog_s; auto: the first step max(60 s, its FLOPs at 0.5 GFLOP/s
//               per rank), then max(60 s, 10 x the slowest step)
//   final write the set-up's rule on the last step patience, from the last step's end:
//               every step finished and every rank holds every step's records, so a slow
//               write (rank 0's file system) is not a stuck peer; after it, the step
//               patience again (a flush inside the loop may take it too: arm_write)
// For tests only, MINILST_TEST_STALL=setup:S,final_write:T makes rank 0 pause S seconds
// in the set-up and T seconds before the final write (the waits its peers see from a slow
// set-up or a slow file system); it is recorded with the run's environment.
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

  // The watchdog's patience for the set-up: the first wait armed after the deck is read
  // (0 on one rank).
  static double first_patience(const Deck& deck, int nranks, double flops_per_rank);
  // Arms the watchdog for the first step.
  void start();

  // Collective, after every step: the watchdog armed for the next step; why the run stops
  // after this step ("" to go on; always "" after the last step).
  std::string after_step(long step, double step_seconds);
  // Before the final write: its own patience, and the step patience again once the results
  // are written (Watchdog::finishing). The last step's after_step arms it already.
  void arm_final_write();
  // Before a write every rank waits for inside the step loop (a flush of the metrics file):
  // the final write's patience, until the next after_step re-arms the step's.
  void arm_write(const std::string& what);

 private:
  // The patience of the next step (0 on one rank).
  double step_patience() const;

  const Deck& deck_;
  MPI_Comm comm_;
  int rank_, nranks_;
  Watchdog& watchdog_;
  double flops_per_rank_, slowest_ = 0;
  StopControl stopper_;
};

// The test hook: rank 0 pauses for the seconds MINILST_TEST_STALL gives `where` (setup, final_write).
void test_stall(const char* where, int rank);

}  // namespace minilst
