#include "job/watchdog.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "job/job_clock.hpp"

namespace minilst {

namespace {
// Whether MPI_COMM_WORLD has other ranks (true before MPI_Init: the caller's patience holds).
bool world_has_peers() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return true;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size > 1;
}

// 0.35 -> "0.35 s", 75.2 -> "75 s".
std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, s < 10 ? "%.2g s" : "%.0f s", s);
  return text;
}
}  // namespace

Watchdog::Watchdog(int rank, double patience_s, std::string waiting_for)
    : rank_(rank), peers_(world_has_peers()), patience_(peers_ ? patience_s : 0), waiting_for_(std::move(waiting_for)) {
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

void Watchdog::arm(double patience_s, const std::string& waiting_for, const std::string& suspect) {
  std::lock_guard<std::mutex> lock(mutex_);
  patience_ = peers_ ? patience_s : 0;  // alone, nothing can stall this rank but itself
  waiting_for_ = waiting_for;
  suspect_ = suspect;
  waited_ = 0;
}

void Watchdog::kick() {
  std::lock_guard<std::mutex> lock(mutex_);
  waited_ = 0;
}

void Watchdog::set_rescue(std::function<void(const std::string&)> rescue) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return !rescuing_; });
  rescue_ = std::move(rescue);
}

void Watchdog::set_finishing_patience(double patience_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  finishing_patience_ = patience_s;
}

void Watchdog::finishing(int code) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return !rescuing_; });
  finishing_code_ = code;
  rescue_ = {};
  if (peers_ && finishing_patience_ > 0 && patience_ > 0) patience_ = finishing_patience_;
  waiting_for_ = "the other ranks to finish";
  waited_ = 0;
}

double Watchdog::first_step_patience(double flops_per_rank) { return std::max(60.0, flops_per_rank / 0.5e9); }
double Watchdog::step_patience(double slowest_step_s) { return std::max(60.0, 10.0 * slowest_step_s); }
double Watchdog::long_wait_patience(double step_s) { return std::max(kSetupFloorSeconds, 10.0 * step_s); }

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  double last_tick = JobClock::now();
  while (!cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return done_; })) {
    const double now = JobClock::now(), tick = now - last_tick;
    last_tick = now;
    // A long gap: this process was stopped or suspended, and its own wait is not a peer's fault.
    if (tick <= kLongestTickSeconds) waited_ += tick;
    if (patience_ <= 0 || waited_ <= patience_) continue;
    if (finishing_code_ >= 0) {
      std::fprintf(stderr,
                   "warning (rank %d): the results are written, but another rank has not finished after %.0f s "
                   "(stopped or dead?): ending this rank with exit code %d\n",
                   rank_, waited_, finishing_code_);
      std::fflush(stderr);
      std::_Exit(finishing_code_);
    }
    fire(lock);
  }
}

// Past the patience: the message, the rescue (bounded), the exit.
void Watchdog::fire(std::unique_lock<std::mutex>& lock) {
  const std::string why = "the watchdog (run.watchdog_s): waited " + seconds_text(waited_) + " for " + waiting_for_ +
                          " (patience " + seconds_text(patience_) + "): " + suspect_;
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

}  // namespace minilst
