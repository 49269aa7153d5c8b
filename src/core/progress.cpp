#include "core/progress.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace minilst {

namespace {
std::mutex stage_mutex;
std::string current_stage = "setting up";

std::string elapsed_text(double s) {
  const long t = long(s);
  char out[32];
  std::snprintf(out, sizeof out, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return out;
}
}  // namespace

double progress_period_seconds() {
  const char* v = std::getenv("MINILST_PROGRESS_SECONDS");
  const double s = v ? std::atof(v) : 0.0;
  return s > 0 ? s : 10.0;
}

void progress_stage(const std::string& what) {
  const std::lock_guard<std::mutex> lock(stage_mutex);
  current_stage = what;
}

ProgressTicker::ProgressTicker(std::string command, bool enabled) : command_(std::move(command)) {
  progress_stage("setting up");
  if (enabled) thread_ = std::thread([this] { loop(); });
}

ProgressTicker::~ProgressTicker() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProgressTicker::loop() {
  const auto start = std::chrono::steady_clock::now();
  const auto period = std::chrono::duration<double>(progress_period_seconds());
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
    std::string stage;
    {
      const std::lock_guard<std::mutex> s(stage_mutex);
      stage = current_stage;
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%s: %s (elapsed %s)\n", command_.c_str(), stage.c_str(), elapsed_text(elapsed).c_str());
    std::fflush(stderr);
  }
}

}  // namespace minilst
