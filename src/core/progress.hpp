// While a long command works (plan, probe, verify), a line on stderr at least every period
// (MINILST_PROGRESS_SECONDS, default 10 s): "<command>: <stage> (elapsed 0:00:20)", from a thread of
// its own, so that a batch job's log shows that the command is alive and where it is. The command
// names its stages as it goes (progress_stage); stdout (a plan's JSON) is left alone.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace minilst {

// The period of the lines: MINILST_PROGRESS_SECONDS where set (> 0), else 10 s.
double progress_period_seconds();

class ProgressTicker {
 public:
  // Prints nothing where !enabled (every rank but 0); at most one ticker runs at a time.
  ProgressTicker(std::string command, bool enabled);
  ~ProgressTicker();
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

 private:
  void loop();
  std::string command_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// What the running command is doing now (the next line shows it); a no-op without a ticker.
void progress_stage(const std::string& what);

}  // namespace minilst
