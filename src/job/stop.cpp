#include "job/stop.hpp"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>

#include "job/job_clock.hpp"

namespace minilst {

namespace {

volatile std::sig_atomic_t g_signal = 0;   // the first stop signal received, 0 = none
volatile std::sig_atomic_t g_writing = 0;  // the final write is under way: nothing ends the process

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP, SIGQUIT, SIGPIPE};

extern "C" void on_stop_signal(int sig) {
  if (sig == SIGINT && g_signal == SIGINT && !g_writing) {  // Ctrl-C twice: stop now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  if (!g_signal) g_signal = sig;
}

const char* g_command = "plan";  // the answering command's name, set before the handlers
char g_remove[4][4096];          // files to remove when a signal ends the command ("" : none)

extern "C" void on_plan_signal(int sig) {  // async-signal-safe: write, unlink and _exit only
  for (auto& path : g_remove)
    if (path[0]) ::unlink(path);
  static const char head[] = "\nminilst ", tail[] = ": stopped by ";
  const char* name = signal_name(sig);
  ssize_t ignored = ::write(STDERR_FILENO, head, sizeof head - 1);
  ignored = ::write(STDERR_FILENO, g_command, std::strlen(g_command));
  ignored = ::write(STDERR_FILENO, tail, sizeof tail - 1);
  ignored = ::write(STDERR_FILENO, name, std::strlen(name));
  ignored = ::write(STDERR_FILENO, "\n", 1);
  (void)ignored;
  ::_exit(4);
}

void install(void (*handler)(int), int flags) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = flags;
  for (int sig : kStopSignals) sigaction(sig, &sa, nullptr);
  std::signal(SIGXFSZ, SIG_IGN);
}

// Reasons, ordered: the all-reduce keeps the largest (a signal over a budget).
enum Reason : int { go_on = 0, deck_budget = 1, job_end = 2, signal_base = 100 };

}  // namespace

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGPIPE: return "SIGPIPE (the output pipe closed)";
  }
  return "a signal";
}

// SA_RESTART: system calls (MPI's, the file system's) go on after the flag is set.
void install_stop_signal_handlers() { install(on_stop_signal, SA_RESTART); }
void remove_when_stopped(const std::string& path) {
  for (auto& slot : g_remove)
    if (!slot[0] && path.size() < sizeof slot) {
      std::memcpy(slot, path.c_str(), path.size() + 1);
      return;
    }
}

void install_plan_signal_handlers(const char* command) {
  g_command = command;
  install(on_plan_signal, 0);
}
void protect_results_write(bool on) { g_writing = on ? 1 : 0; }

StopSignalsHeld::StopSignalsHeld() {
  sigset_t held;
  sigemptyset(&held);
  for (int sig : kStopSignals) sigaddset(&held, sig);
  pthread_sigmask(SIG_BLOCK, &held, &old_);
}
StopSignalsHeld::~StopSignalsHeld() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
int stop_signal() { return g_signal; }

StopControl::StopControl(double time_limit_s, int rank)
    : start_(JobClock::now()), budget_(time_limit_s), clock_(rank == 0) {}

std::string StopControl::after_step(MPI_Comm comm, int nranks, double step_seconds) {
  slowest_ = std::max(slowest_, step_seconds);
  const double now = JobClock::now(), next_step = 1.5 * slowest_;
  int reason = go_on;
  if (budget_ > 0 && now - start_ + next_step > budget_) reason = deck_budget;
  if (const double end = clock_.end(); end > 0 && now + next_step + kJobEndMargin > end) reason = job_end;
  if (g_signal) reason = signal_base + int(g_signal);
  if (nranks > 1) MPI_Allreduce(MPI_IN_PLACE, &reason, 1, MPI_INT, MPI_MAX, comm);
  if (reason == go_on) return "";
  if (reason == deck_budget) return "run.time_limit_s would be exceeded by one more step";
  if (reason == job_end) return "the Slurm job's end time would be reached by one more step";
  return std::string(signal_name(reason - signal_base)) + " received";
}

}  // namespace minilst
