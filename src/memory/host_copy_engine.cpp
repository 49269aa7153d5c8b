#include "memory/host_copy_engine.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "kernels/compat.hpp"

namespace minilst {

namespace {
using Clock = std::chrono::steady_clock;
constexpr std::size_t kPiece = std::size_t(1) << 20;  // throttled copies advance 1 MiB at a time
}  // namespace

HostCopyEngine::HostCopyEngine(double bandwidth_gbs)
    : bytes_per_second_(bandwidth_gbs * 1e9), worker_([this] { run(); }) {}

HostCopyEngine::~HostCopyEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_one();
  worker_.join();
}

std::string HostCopyEngine::name() const {
  return bytes_per_second_ > 0 ? "host-thread (capped at " + std::to_string(bytes_per_second_ / 1e9) + " GB/s)"
                               : "host-thread";
}

CopyEngine::Ticket HostCopyEngine::submit(void* dst, const void* src, std::size_t bytes, Direction direction) {
  compat::fence("copy engine: source ready");
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.push_back({dst, src, bytes, direction});
  const Ticket ticket = ++submitted_;
  work_.notify_one();
  return ticket;
}

bool HostCopyEngine::done(Ticket ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= ticket;
}

void HostCopyEngine::wait(Ticket ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return completed_ >= ticket; });
}

void HostCopyEngine::wait_all() {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return completed_ >= submitted_; });
}

CopyEngine::Counters HostCopyEngine::take_counters() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(counters_, Counters{});
}

void HostCopyEngine::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    const Job job = queue_.front();
    lock.unlock();
    const double seconds = copy(job);
    lock.lock();
    queue_.pop_front();
    ++completed_;
    (job.direction == Direction::to_host ? counters_.bytes_to_host : counters_.bytes_to_device) += job.bytes;
    counters_.busy_seconds += seconds;
    finished_.notify_all();
  }
}

double HostCopyEngine::copy(const Job& job) {
  auto* dst = static_cast<unsigned char*>(job.dst);
  const auto* src = static_cast<const unsigned char*>(job.src);
  const auto start = Clock::now();
  if (bytes_per_second_ <= 0) {
    std::memcpy(dst, src, job.bytes);
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  // Throttled: piece k may finish no earlier than start + (bytes so far) / bandwidth.
  // The link is busy for bytes / bandwidth (or the memcpy, if slower); the
  // sleeps' overshoot delays the copy's completion but is not link time.
  for (std::size_t done = 0; done < job.bytes;) {
    const std::size_t n = std::min(kPiece, job.bytes - done);
    std::memcpy(dst + done, src + done, n);
    done += n;
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(double(done) / bytes_per_second_)));
  }
  return double(job.bytes) / bytes_per_second_;
}

}  // namespace minilst
