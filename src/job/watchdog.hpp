// Ends this rank, with a message, when it waits too long for its peers: a peer that
// is stopped, dead or deadlocked would otherwise leave it waiting in MPI forever (the
// launcher then ends the other ranks). Armed from MPI_Init to MPI_Finalize, each wait
// with its own patience (job/step_guard.hpp says which): the start-up, the set-up, the
// first step, every step, the final write and the exit. Before it ends the rank it
// runs the rescue (the finished steps written, results/metrics_recorder.hpp) and exits
// 1; once the results are written (finishing), a peer that never arrives only costs
// the patience, and the rank exits with the run's own code.
// What it never does: act in a job of one rank (no peer can stall it), or count time
// during which this process itself was stopped (SIGSTOP, a suspended Slurm job): it
// times only the waits it names.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace minilst {

class Watchdog {
 public:
  // patience_s: the longest wait for progress; 0 = never fires. A process that is the
  // only rank of MPI_COMM_WORLD never fires, whatever it is armed with.
  Watchdog(int rank, double patience_s, std::string waiting_for);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A new patience and what the rank waits for (for the message); the wait starts afresh.
  // `suspect`: what a wait past the patience means (the message's end).
  void arm(double patience_s, const std::string& waiting_for, const std::string& suspect = kStuckPeer);
  void kick();  // progress: the wait starts afresh
  // Called on the watchdog's thread before it ends the rank (at most kRescueSeconds); {} clears
  // it. Both calls wait for a rescue under way (the process then ends): what it reads stays alive.
  void set_rescue(std::function<void(const std::string& why)> rescue);
  // The patience finishing() uses (0: keep the one armed last).
  void set_finishing_patience(double patience_s);
  // The results are written: past the patience, end the rank with `code` (peers are only late).
  void finishing(int code);
  // Whether this watchdog can ever fire (false alone in MPI_COMM_WORLD).
  bool has_peers() const { return peers_; }

  static constexpr double kRescueSeconds = 60;   // the longest a rescue may take before the rank ends anyway
  static constexpr double kPeerGraceSeconds = 15;  // ranks without a rescue wait this long for rank 0's
  static constexpr const char* kStuckPeer = "a rank is stopped, dead or deadlocked";
  // Waits shorter than this need no patience of their own: the set-up's and the final
  // write's patience are at least this long (slow file systems, first-touch of large
  // allocations, NCCL's start, the peak measurement).
  static constexpr double kSetupFloorSeconds = 600;
  // A gap between two of the watchdog's ticks longer than this means the whole process was
  // stopped (SIGSTOP, a suspended job): it is not counted as waiting.
  static constexpr double kLongestTickSeconds = 2;

  // The patience before the first step, without run.watchdog_s: generous, and longer for
  // a step of more FLOPs (at a pessimistic 0.5 GFLOP/s per rank), never below 60 s (the floor of every later step).
  static double first_step_patience(double flops_per_rank);
  // After a step: max(60 s, 10 x the slowest step).
  static double step_patience(double slowest_step_s);
  // The set-up (before step 1) and the final write (after the last step): max(10 min,
  // 10 x the step patience `step_s`).
  static double long_wait_patience(double step_s);

 private:
  void watch();
  [[noreturn]] void fire(std::unique_lock<std::mutex>& lock);

  const int rank_;
  const bool peers_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  double patience_ = 0, waited_ = 0, finishing_patience_ = 0;
  int finishing_code_ = -1;
  bool rescuing_ = false;
  std::string waiting_for_, suspect_ = kStuckPeer;
  std::function<void(const std::string&)> rescue_;
  std::thread thread_;
};

}  // namespace minilst
