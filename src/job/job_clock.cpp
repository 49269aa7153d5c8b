#include "job/job_clock.hpp"

#include <chrono>
#include <cstdlib>
#include <ctime>

#include "job/slurm_ids.hpp"
#include "job/subprocess.hpp"

namespace minilst {

namespace {

// squeue's output, "" when it cannot run or takes longer than timeout_s (it is then killed).
std::string run_squeue(const std::string& job, double timeout_s) {
  return run_command({"squeue", "-h", "-j", job, "-o", "%L"}, timeout_s);
}

}  // namespace

double JobClock::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double JobClock::parse_time_left(const std::string& raw) {
  const auto first = raw.find_first_not_of(" \t\n"), last = raw.find_last_not_of(" \t\n");
  if (first == std::string::npos) return -1;
  std::string text = raw.substr(first, last - first + 1);
  double days = 0;
  if (const auto dash = text.find('-'); dash != std::string::npos) {
    char* end = nullptr;
    days = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + dash || days < 0) return -1;
    text = text.substr(dash + 1);
  }
  std::vector<double> parts;  // [hours:]minutes:seconds
  std::size_t start = 0;
  for (;;) {
    const auto colon = text.find(':', start);
    const std::string part = text.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    char* end = nullptr;
    const double v = std::strtod(part.c_str(), &end);
    if (part.empty() || *end != '\0' || v < 0) return -1;
    parts.push_back(v);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) return -1;
  double seconds = 0;
  for (const double p : parts) seconds = 60 * seconds + p;
  return days * 86400 + seconds;
}

JobClock::JobClock(bool active, double poll_s) {
  if (!active) return;
  if (const char* end = std::getenv("SLURM_JOB_END_TIME")) {  // Unix seconds, where Slurm sets it
    char* tail = nullptr;
    const double t = std::strtod(end, &tail);
    if (tail != end && t > 0) end_ = now() + (t - double(std::time(nullptr)));
  }
  const std::string job = safe_slurm_id("SLURM_JOB_ID");  // unset or not an identifier: squeue is not asked
  if (!job.empty()) poller_ = std::thread([this, job, poll_s] { poll(job, poll_s); });
}

JobClock::~JobClock() {
  if (!poller_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
  poller_.join();
}

void JobClock::poll(const std::string& job, double poll_s) {
  std::unique_lock<std::mutex> lock(mutex_);
  do {
    lock.unlock();
    const double asked = now(), left = parse_time_left(run_squeue(job, 10.0));
    if (left >= 0) end_ = asked + left;
    lock.lock();
  } while (!cv_.wait_for(lock, std::chrono::duration<double>(poll_s), [this] { return done_; }));
}

}  // namespace minilst
