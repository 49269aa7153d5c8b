// Ends this rank, with a message, when it makes no progress for too long: a peer
// that is stopped, dead or deadlocked would otherwise leave it waiting in MPI
// forever (the launcher then ends the other ranks). Armed from MPI_Init to
// MPI_Finalize: the start-up, the first step (its own, longer patience), every
// step, the final write and the exit. Before it ends the rank it runs the rescue
// (the finished steps written, io/run_record.hpp) and exits 1; once the results
// are written (finishing), a peer that never arrives only costs the grace period,
// and the rank exits with the run's own code.
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
  // patience_s: the longest wait for progress; 0 = never fires.
  Watchdog(int rank, double patience_s, std::string waiting_for);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A new patience and what the rank waits for (for the message); the wait starts afresh.
  void arm(double patience_s, const std::string& waiting_for);
  void kick();  // progress: the wait starts afresh
  // Called on the watchdog's thread before it ends the rank (at most kRescueSeconds); {} clears
  // it. Both calls wait for a rescue under way (the process then ends): what it reads stays alive.
  void set_rescue(std::function<void(const std::string& why)> rescue);
  // The results are written: past the patience, end the rank with `code` (peers are only late).
  void finishing(int code);

  static constexpr double kRescueSeconds = 60;   // the longest a rescue may take before the rank ends anyway
  static constexpr double kPeerGraceSeconds = 15;  // ranks without a rescue wait this long for rank 0's

  // The patience before the first step, without run.watchdog_s: generous, and longer for
  // a step of more FLOPs (at a pessimistic 0.5 GFLOP/s per rank), never below 60 s (the floor of every later step).
  static double first_step_patience(double flops_per_rank);
  // After a step: max(60 s, 10 x the slowest step).
  static double step_patience(double slowest_step_s);

 private:
  void watch();

  const int rank_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  double patience_ = 0, last_progress_ = 0;
  int finishing_code_ = -1;
  bool rescuing_ = false;
  std::string waiting_for_;
  std::function<void(const std::string&)> rescue_;
  std::thread thread_;
};

}  // namespace minilst
