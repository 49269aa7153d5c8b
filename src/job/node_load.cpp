#include "job/node_load.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace minilst {

namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// /proc/stat's first line: cpu user nice system idle iowait irq softirq steal ...
bool read_node_ticks(CpuSample& s) {
  std::ifstream in("/proc/stat");
  std::string label;
  double v[8] = {};
  if (!(in >> label) || label != "cpu") return false;
  for (double& x : v)
    if (!(in >> x)) return false;
  s.busy = v[0] + v[1] + v[2] + v[5] + v[6];
  s.steal = v[7];
  for (double x : v) s.total += x;
  return true;
}

// /proc/self/stat: fields 14 and 15 (utime, stime) follow the command name in parentheses.
bool read_self_ticks(CpuSample& s) {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  s.self = utime + stime;
  return true;
}

double load_average_1min() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  return in >> one ? one : 0.0;
}

}  // namespace

CpuSample sample_cpu() {
  CpuSample s;
  s.wall = wall_seconds();
  s.known = read_node_ticks(s) && read_self_ticks(s);
  return s;
}

NodeLoad node_load_since(const CpuSample& start, int threads_per_rank, MPI_Comm comm, double min_seconds) {
  const CpuSample now = sample_cpu();
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_size = 1;
  MPI_Comm_size(node, &node_size);
  // the node's ranks' own ticks, summed; whether every rank could read /proc
  double mine[2] = {start.known && now.known ? now.self - start.self : 0.0, start.known && now.known ? 0.0 : 1.0};
  double ranks[2] = {0, 0};
  MPI_Allreduce(mine, ranks, 2, MPI_DOUBLE, MPI_SUM, node);
  MPI_Comm_free(&node);
  const double tick = double(sysconf(_SC_CLK_TCK));
  const double wall = now.wall - start.wall, total = now.total - start.total;
  // per node: other cores, steal, load average, cores used, 1 where not sampled (every rank of a node
  // computes the same; the max over all ranks)
  double local[5] = {0, 0, 0, 0, 1};
  if (ranks[1] == 0 && wall >= min_seconds && wall > 0 && total > 0 && tick > 0) {
    const double others = (now.busy - start.busy) - ranks[0];
    local[0] = std::max(0.0, others / tick / wall);
    local[1] = (now.steal - start.steal) / total;
    local[2] = load_average_1min();
    local[3] = double(node_size * std::max(1, threads_per_rank));
    local[4] = 0;
  }
  double worst[5];
  MPI_Allreduce(local, worst, 5, MPI_DOUBLE, MPI_MAX, comm);
  NodeLoad load;
  if (worst[4] > 0) return load;
  load.known = true;
  load.other_cores = worst[0];
  load.steal_fraction = worst[1];
  load.load_average = worst[2];
  load.cores_used = int(worst[3]);
  load.cores = int(sysconf(_SC_NPROCESSORS_ONLN));
  return load;
}

std::string NodeLoad::text() const {
  if (!known) return "not sampled (no /proc)";
  char out[160];
  std::snprintf(out, sizeof out, "other processes %.2f cores, steal %.1f%%, load average %.2f on %d cores (the run uses %d)",
                other_cores, 100 * steal_fraction, load_average, cores, cores_used);
  return out;
}

std::string NodeLoad::excess() const {
  if (!known) return "";
  char out[200];
  if (other_cores > kMaxOtherCores) {
    std::snprintf(out, sizeof out, "node loaded: other processes used %.2f cores beside the run (above %.2f; load average %.2f on %d cores)",
                  other_cores, kMaxOtherCores, load_average, cores);
    return out;
  }
  if (steal_fraction > kMaxStealFraction) {
    std::snprintf(out, sizeof out, "node loaded: the hypervisor stole %.1f%% of its CPU time (above %.0f%%)",
                  100 * steal_fraction, 100 * kMaxStealFraction);
    return out;
  }
  return "";
}

}  // namespace minilst
