// When the Slurm job this process runs in ends: from SLURM_JOB_END_TIME where the
// site's Slurm sets it, and from `squeue -h -j $SLURM_JOB_ID -o %L` (the time
// left) on any Slurm, re-read every poll_s seconds on a background thread, so a
// limit changed while the job runs (`scontrol update JobId=... TimeLimit=...`) is
// seen. Outside a Slurm job, or without squeue, the end is unknown (0).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace minilst {

class JobClock {
 public:
  // active = false: never reads anything (ranks other than 0).
  explicit JobClock(bool active, double poll_s = 30.0);
  ~JobClock();
  JobClock(const JobClock&) = delete;
  JobClock& operator=(const JobClock&) = delete;

  // The job's end on now()'s clock; 0 when unknown or unlimited.
  double end() const { return end_; }
  // Seconds on a monotonic clock (std::chrono::steady_clock).
  static double now();
  // Seconds left in `squeue -o %L` form ([days-][hours:]minutes:seconds); < 0 when it is
  // not a time (UNLIMITED, NOT_SET, INVALID, empty).
  static double parse_time_left(const std::string& text);

 private:
  void poll(const std::string& job, double poll_s);

  std::atomic<double> end_{0.0};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread poller_;
};

}  // namespace minilst
