// Stopping a run early, cleanly. A stop signal only sets a flag: SIGTERM (Slurm at
// the time limit, scancel, kill), SIGINT, SIGUSR1 and SIGUSR2 (sbatch --signal),
// SIGHUP (a closed terminal), SIGQUIT, SIGPIPE (stdout closed, e.g. `| head`).
// After every step the ranks agree (one small all-reduce) whether to go on, so
// they all stop after the same step, write the metrics of the steps done and exit
// with code 4. A second SIGINT (Ctrl-C twice) ends the process at once, except
// while the results are being written: no signal abandons the final write.
// SIGXFSZ is ignored: a write past the file-size limit fails (EFBIG) and is
// reported like a full disk.
// A time budget stops the run when one more step would overrun it:
// run.time_limit_s, and the Slurm job's end time (job_clock.hpp).
#pragma once

#include <mpi.h>
#include <signal.h>

#include <string>

#include "job/job_clock.hpp"

namespace minilst {

// Once, before any work (after MPI_Init, so that MPI's own handlers are replaced).
void install_stop_signal_handlers();
// `minilst plan` (and validate, probe, verify) runs no steps: a signal ends it at once, exit 4, with
// a message naming `command` (a string that outlives the process's handlers).
void install_plan_signal_handlers(const char* command = "plan");
// A file such a command holds (an output's lock) that a signal ending it removes first (at most 4).
void remove_when_stopped(const std::string& path);
// While true, signals are noted but never end the process (the final write).
void protect_results_write(bool on);
// While one lives, this thread holds the stop signals back (a command's final write under
// install_plan_signal_handlers: a signal then ends the process after the write, not in it).
class StopSignalsHeld {
 public:
  StopSignalsHeld();
  ~StopSignalsHeld();
  StopSignalsHeld(const StopSignalsHeld&) = delete;
  StopSignalsHeld& operator=(const StopSignalsHeld&) = delete;

 private:
  sigset_t old_{};
};
// The first stop signal received (0: none), and a signal's name.
int stop_signal();
const char* signal_name(int sig);

class StopControl {
 public:
  // time_limit_s: the run's budget in seconds from now (0: none). The job clock is
  // read on rank 0 alone; the all-reduce in after_step shares its verdict.
  StopControl(double time_limit_s, int rank);

  // Collective over comm (every rank, after every step): why the run stops after
  // this step, the same on every rank; "" to go on. A budget stops the run when one
  // more step (the slowest so far, with a margin) would overrun it.
  std::string after_step(MPI_Comm comm, int nranks, double step_seconds);

  // Seconds kept free before the job's end for the last step's write and the exit.
  static constexpr double kJobEndMargin = 10.0;

 private:
  double start_ = 0, budget_ = 0, slowest_ = 0;
  JobClock clock_;
};

}  // namespace minilst
