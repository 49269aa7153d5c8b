#include "app/stop.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <chrono>

namespace minilst {

namespace {

volatile std::sig_atomic_t g_signal = 0;  // the first stop signal received, 0 = none

extern "C" void on_stop_signal(int sig) {
  if (g_signal == sig) {  // asked twice: stop now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal = sig;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
  }
  return "a signal";
}

// Reasons, ordered: the all-reduce keeps the largest (a signal over a budget).
enum Reason : int { go_on = 0, deck_budget = 1, job_end = 2, signal_base = 100 };

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // system calls (MPI's, the file system's) go on after the flag is set
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) sigaction(sig, &sa, nullptr);
}

StopControl::StopControl(double time_limit_s, double watchdog_s, int rank)
    : start_(now_seconds()), slowest_(0), watchdog_s_(watchdog_s), rank_(rank), last_progress_(0),
      patience_(watchdog_s) {
  watchdog_ = std::thread([this] { watch(); });
  if (time_limit_s > 0) {
    budget_ = time_limit_s;
    source_ = "run.time_limit_s";
  }
  // Slurm's job end time (Unix seconds), less a minute for writing the results.
  if (const char* end = std::getenv("SLURM_JOB_END_TIME")) {
    char* tail = nullptr;
    const double t = std::strtod(end, &tail);
    if (tail != end && t > 0) {
      const double left = t - double(std::time(nullptr)) - 60.0;
      if (left > 0 && (budget_ == 0 || left < budget_)) {
        budget_ = left;
        source_ = "SLURM_JOB_END_TIME";
      }
    }
  }
}

StopControl::~StopControl() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  done_cv_.notify_all();
  watchdog_.join();
}

void StopControl::kick() { last_progress_ = now_seconds() - start_; }

void StopControl::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!done_cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return done_; })) {
    const double patience = patience_, waited = now_seconds() - start_ - last_progress_;
    if (patience > 0 && waited > patience) {
      std::fprintf(stderr,
                   "error (rank %d): no step finished for %.0f s (run.watchdog_s %.0f; the slowest step took %.2f s): "
                   "a rank is stopped, dead or deadlocked; ending this rank\n",
                   rank_, waited, patience, double(slowest_));
      std::fflush(stderr);
      std::_Exit(1);
    }
  }
}

std::string StopControl::after_step(MPI_Comm comm, int nranks, double step_seconds) {
  if (step_seconds > slowest_) slowest_ = step_seconds;
  if (watchdog_s_ <= 0) patience_ = std::max(60.0, 10.0 * slowest_);
  kick();
  int reason = go_on;
  if (budget_ > 0 && now_seconds() - start_ + 1.5 * slowest_ > budget_)
    reason = source_ == "run.time_limit_s" ? deck_budget : job_end;
  if (g_signal) reason = signal_base + int(g_signal);
  if (nranks > 1) MPI_Allreduce(MPI_IN_PLACE, &reason, 1, MPI_INT, MPI_MAX, comm);
  if (reason == go_on) return "";
  if (reason == deck_budget) return "run.time_limit_s would be exceeded by one more step";
  if (reason == job_end) return "the Slurm job's end time would be reached by one more step";
  return std::string(signal_name(reason - signal_base)) + " received";
}

}  // namespace minilst
