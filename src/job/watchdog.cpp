#include "job/watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "job/job_clock.hpp"

namespace minilst {

Watchdog::Watchdog(int rank, double patience_s, std::string waiting_for)
    : rank_(rank), patience_(patience_s), last_progress_(JobClock::now()), waiting_for_(std::move(waiting_for)) {
  thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::arm(double patience_s, const std::string& waiting_for) {
  std::lock_guard<std::mutex> lock(mutex_);
  patience_ = patience_s;
  waiting_for_ = waiting_for;
  last_progress_ = JobClock::now();
}

void Watchdog::kick() {
  std::lock_guard<std::mutex> lock(mutex_);
  last_progress_ = JobClock::now();
}

void Watchdog::set_rescue(std::function<void(const std::string&)> rescue) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return !rescuing_; });
  rescue_ = std::move(rescue);
}

void Watchdog::finishing(int code) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return !rescuing_; });
  finishing_code_ = code;
  rescue_ = {};
  waiting_for_ = "the other ranks to finish";
  last_progress_ = JobClock::now();
}

double Watchdog::first_step_patience(double flops_per_rank) { return std::max(60.0, flops_per_rank / 0.5e9); }
double Watchdog::step_patience(double slowest_step_s) { return std::max(60.0, 10.0 * slowest_step_s); }

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return done_; })) {
    const double waited = JobClock::now() - last_progress_;
    if (patience_ <= 0 || waited <= patience_) continue;
    if (finishing_code_ >= 0) {
      std::fprintf(stderr,
                   "warning (rank %d): the results are written, but another rank has not finished after %.0f s "
                   "(stopped or dead?): ending this rank with exit code %d\n",
                   rank_, waited, finishing_code_);
      std::fflush(stderr);
      std::_Exit(finishing_code_);
    }
    const std::string why = "the watchdog (run.watchdog_s): waited " + std::to_string(int(waited)) + " s for " +
                            waiting_for_ + " (patience " + std::to_string(int(patience_)) +
                            " s): a rank is stopped, dead or deadlocked";
    std::fprintf(stderr, "error (rank %d): %s; ending this rank\n", rank_, why.c_str());
    std::fflush(stderr);
    const auto rescue = rescue_;
    rescuing_ = true;  // set_rescue and finishing wait: what the rescue reads stays alive until the exit
    lock.unlock();
    // Bounded: a rescue stuck on a file system or a full pipe still ends the rank.
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::duration<double>(kRescueSeconds));
      std::_Exit(1);
    }).detach();
    if (rescue) {
      rescue(why);
    } else {  // rank 0 writes the finished steps; leaving now would break its collective and end it too
      std::this_thread::sleep_for(std::chrono::duration<double>(kPeerGraceSeconds));
    }
    std::_Exit(1);
  }
}

}  // namespace minilst
