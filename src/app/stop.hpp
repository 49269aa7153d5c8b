// Stopping a run early, cleanly: on a signal (SIGTERM from Slurm at the time
// limit, scancel or kill; SIGINT; SIGUSR1 from `sbatch --signal=USR1@120`) or
// before a time budget runs out (run.time_limit_s, and the job's end time where
// Slurm gives it in SLURM_JOB_END_TIME). A signal only sets a flag; after every
// step the ranks agree (one small all-reduce) whether to go on, so they all stop
// after the same step, write the metrics of the steps done and exit.
// A second signal of the same kind ends the process at once.
// A watchdog thread ends the process (exit 1, with a message) when no step
// finishes for too long: a stopped, dead or deadlocked peer would otherwise leave
// this rank waiting in MPI forever. The launcher then ends the other ranks.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace minilst {

// Once, before any work: SIGTERM, SIGINT and SIGUSR1 set the stop flag.
void install_stop_signal_handlers();

class StopControl {
 public:
  // time_limit_s: the run's budget in seconds from now (0: none). watchdog_s: the
  // longest wait for a step (0: auto, max(60 s, 10 x the slowest step), from step 1 on).
  StopControl(double time_limit_s, double watchdog_s, int rank);
  ~StopControl();
  StopControl(const StopControl&) = delete;
  StopControl& operator=(const StopControl&) = delete;

  // Progress that is not a step (a metrics write): the watchdog waits afresh.
  void kick();

  // Collective over comm (every rank, after every step): why the run stops after
  // this step, the same on every rank; "" to go on. A time budget stops the run
  // when one more step (the slowest so far, with a margin) would overrun it.
  std::string after_step(MPI_Comm comm, int nranks, double step_seconds);

 private:
  void watch();

  double start_ = 0, budget_ = 0;
  std::atomic<double> slowest_;
  std::string source_;
  const double watchdog_s_;
  const int rank_;
  std::atomic<double> last_progress_, patience_;  // s since start_; 0 patience = not armed
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread watchdog_;
};

}  // namespace minilst
