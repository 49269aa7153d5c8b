#include "io/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "io/h5.hpp"
#include "memory/tracker.hpp"

namespace minilst {

const std::vector<std::string>& metric_phases() {
  static const std::vector<std::string> phases = {
      "step",     "forward",   "backward",     "attention",     "mlp",          "lm_head",   "recompute",
      "comm",     "alltoall",  "ring_wait",    "offload_wait",  "prefetch_wait", "copy_engine_busy",
      "optimizer"};
  return phases;
}

const std::vector<std::string>& metric_offload_directions() {
  static const std::vector<std::string> directions = {"to_host", "to_device"};
  return directions;
}

const std::vector<std::string>& metric_comm_ops() {
  static const std::vector<std::string> ops = {"alltoall", "ring", "allreduce"};
  return ops;
}

namespace {
std::vector<std::string> memory_keys() {
  std::vector<std::string> keys;
  for (int c = 0; c < kNumMemCategories; ++c) keys.push_back(category_name(MemCategory(c)));
  keys.push_back("device_total");
  return keys;
}
}  // namespace

RunSummary gather_and_write_metrics(MPI_Comm comm, const RunMetrics& local, const std::string& path) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  const auto& phases = metric_phases();
  const int nsteps = int(local.steps.size()), nph = int(phases.size());

  // Per rank: seconds [steps x phases], memory [categories].
  std::vector<double> mine(std::size_t(nsteps) * nph);
  for (int s = 0; s < nsteps; ++s)
    for (int p = 0; p < nph; ++p) {
      const auto it = local.steps[s].seconds.find(phases[p]);
      mine[std::size_t(s) * nph + p] = it == local.steps[s].seconds.end() ? 0.0 : it->second;
    }
  const auto mkeys = memory_keys();
  std::vector<std::uint64_t> mem_mine;  // measured, then predicted, per key
  for (const auto* source : {&local.memory, &local.memory_model})
    for (const auto& k : mkeys) {
      const auto it = source->find(k);
      mem_mine.push_back(it == source->end() ? 0 : it->second);
    }
  std::vector<double> all(rank == 0 ? mine.size() * nranks : 0);
  std::vector<std::uint64_t> mem_all(rank == 0 ? mem_mine.size() * nranks : 0);
  MPI_Gather(mine.data(), int(mine.size()), MPI_DOUBLE, all.data(), int(mine.size()), MPI_DOUBLE, 0, comm);
  const auto& ops = metric_comm_ops();
  const int nops = int(ops.size());
  // [steps + 1, ops]: the measured bytes of every step, then the analytic bytes per step
  std::vector<std::uint64_t> bytes_mine(std::size_t(nsteps + 1) * nops), bytes_all(rank == 0 ? bytes_mine.size() * nranks : 0);
  for (int o = 0; o < nops; ++o) {
    for (int s = 0; s < nsteps; ++s) {
      const auto it = local.steps[s].comm_bytes.find(ops[o]);
      bytes_mine[std::size_t(s) * nops + o] = it == local.steps[s].comm_bytes.end() ? 0 : it->second;
    }
    const auto it = local.comm_model.find(ops[o]);
    bytes_mine[std::size_t(nsteps) * nops + o] = it == local.comm_model.end() ? 0 : it->second;
  }
  MPI_Gather(bytes_mine.data(), int(bytes_mine.size()), MPI_UINT64_T, bytes_all.data(), int(bytes_mine.size()),
             MPI_UINT64_T, 0, comm);
  MPI_Gather(mem_mine.data(), int(mem_mine.size()), MPI_UINT64_T, mem_all.data(), int(mem_mine.size()),
             MPI_UINT64_T, 0, comm);
  const auto& dirs = metric_offload_directions();
  const int ndirs = int(dirs.size());
  std::vector<std::uint64_t> moved_mine(std::size_t(nsteps) * ndirs), moved_all(rank == 0 ? moved_mine.size() * nranks : 0);
  for (int s = 0; s < nsteps; ++s)  // [steps, directions]
    for (int k = 0; k < ndirs; ++k) {
      const auto it = local.steps[s].offload_bytes.find(dirs[k]);
      moved_mine[std::size_t(s) * ndirs + k] = it == local.steps[s].offload_bytes.end() ? 0 : it->second;
    }
  MPI_Gather(moved_mine.data(), int(moved_mine.size()), MPI_UINT64_T, moved_all.data(), int(moved_mine.size()),
             MPI_UINT64_T, 0, comm);
  // [steps] allocations, then the plan's three sizes
  const std::vector<std::string> plan_keys = {"arena_bytes", "lower_bound_bytes", "unplanned_peak_bytes",
                                              "model_arena_bytes"};
  std::vector<std::uint64_t> alloc_mine, alloc_all;
  for (const auto& st : local.steps) alloc_mine.push_back(st.allocations);
  for (const auto& k : plan_keys) alloc_mine.push_back(local.plan.count(k) ? local.plan.at(k) : 0);
  alloc_all.resize(rank == 0 ? alloc_mine.size() * nranks : 0);
  MPI_Gather(alloc_mine.data(), int(alloc_mine.size()), MPI_UINT64_T, alloc_all.data(), int(alloc_mine.size()),
             MPI_UINT64_T, 0, comm);
  const std::size_t nal = alloc_mine.size();

  RunSummary summary;
  if (rank != 0) return summary;

  auto seconds = [&](int r, int s, int p) { return all[(std::size_t(r) * nsteps + s) * nph + p]; };
  const int first = std::min(local.warmup_steps, nsteps);
  const int measured = nsteps - first;

  std::vector<double> loss, tokens_per_s(nsteps), tflops(nsteps);
  bool valid = measured > 0;
  for (const auto& st : local.steps) {
    loss.push_back(st.loss);
    valid = valid && std::isfinite(st.loss) && std::isfinite(st.grad_norm);
  }
  for (int s = 0; s < nsteps; ++s) {
    double slowest = 0;
    for (int r = 0; r < nranks; ++r) slowest = std::max(slowest, seconds(r, s, 0));
    tokens_per_s[s] = slowest > 0 ? local.tokens_per_step / slowest : 0.0;
    tflops[s] = slowest > 0 ? local.flops_per_step / slowest / 1e12 : 0.0;
  }
  double measured_seconds = 0;  // sum over measured steps of the slowest rank's step time
  for (int s = first; s < nsteps; ++s) measured_seconds += tokens_per_s[s] > 0 ? local.tokens_per_step / tokens_per_s[s] : 0;
  summary.fom = measured_seconds > 0 ? local.tokens_per_step * measured / measured_seconds / nranks : 0.0;
  summary.valid = valid;
  for (int p = 0; p < nph; ++p) {
    auto& avg = summary.phase_avg_per_rank[phases[p]];
    for (int r = 0; r < nranks; ++r) {
      double sum = 0;
      for (int s = first; s < nsteps; ++s) sum += seconds(r, s, p);
      avg.push_back(measured > 0 ? sum / measured : 0.0);
    }
  }
  const std::size_t nk = mkeys.size();
  for (std::size_t k = 0; k < nk; ++k)
    for (int r = 0; r < nranks; ++r) {
      summary.memory[mkeys[k]].push_back(mem_all[r * 2 * nk + k]);
      if (local.memory_model.count(mkeys[k])) summary.memory_model[mkeys[k]].push_back(mem_all[r * 2 * nk + nk + k]);
    }
  for (int o = 0; o < nops; ++o)
    for (int r = 0; r < nranks; ++r) {
      double sum = 0;
      for (int s = first; s < nsteps; ++s) sum += double(bytes_all[(std::size_t(r) * (nsteps + 1) + s) * nops + o]);
      summary.comm_bytes[ops[o]].push_back(measured > 0 ? sum / measured : 0.0);
    }
  for (int r = 0; r < nranks; ++r) {
    std::uint64_t most = 0;
    for (int s = 1; s < nsteps; ++s) most = std::max(most, alloc_all[r * nal + s]);
    summary.allocations_after_first.push_back(most);
    if (!local.plan.empty())
      for (std::size_t k = 0; k < plan_keys.size(); ++k) summary.plan[plan_keys[k]].push_back(alloc_all[r * nal + nsteps + k]);
  }
  if (path.empty()) return summary;

  h5::AtomicFile file(path);
  {
    const hid_t f = file.id();
    h5::attr(f, "schema", std::string("minilst-metrics"));
    h5::attr(f, "schema_version", std::int64_t(1));
    h5::attr(f, "valid", std::string(valid ? "PASSED" : "FAILED"));
    h5::attr(f, "complete", std::string(local.complete ? "true" : "false"));
    h5::attr(f, "stop_reason", local.stop_reason);
    h5::attr(f, "steps_done", std::int64_t(nsteps));
    h5::attr(f, "fom", summary.fom);
    h5::attr(f, "fom_unit", std::string("tokens/s per rank"));
    h5::attr(f, "config", local.config_yaml);
    h5::attr(f, "warmup_steps", std::int64_t(local.warmup_steps));
    for (const auto& [k, v] : local.attributes) h5::attr(f, k, v);
    for (const auto& [k, v] : local.integers) h5::attr(f, k, v);
    for (const auto& [k, v] : local.reals) h5::attr(f, k, v);
    h5::attr(f, "tokens_per_step", local.tokens_per_step);

    h5::write(f, "loss", loss, {hsize_t(nsteps)}, "1");
    h5::write(f, "throughput/tokens_per_s", tokens_per_s, {hsize_t(nsteps)}, "tokens/s (all ranks)");
    h5::write(f, "throughput/model_tflops", tflops, {hsize_t(nsteps)}, "TFLOP/s (all ranks)");
    for (int p = 0; p < nph; ++p) {
      std::vector<double> t(std::size_t(nsteps) * nranks);  // [steps, ranks]
      for (int s = 0; s < nsteps; ++s)
        for (int r = 0; r < nranks; ++r) t[std::size_t(s) * nranks + r] = seconds(r, s, p);
      const std::string name = "timings/" + phases[p];
      h5::write(f, name, t, {hsize_t(nsteps), hsize_t(nranks)}, "s");
      const auto& avg = summary.phase_avg_per_rank[phases[p]];
      auto ds = h5::Handle(H5Dopen2(f, name.c_str(), H5P_DEFAULT), H5Dclose, "open " + name);
      h5::attr(ds.id(), "Min time/rank", *std::min_element(avg.begin(), avg.end()));
      h5::attr(ds.id(), "Max time/rank", *std::max_element(avg.begin(), avg.end()));
      h5::attr(ds.id(), "Avg time/rank", std::accumulate(avg.begin(), avg.end(), 0.0) / nranks);
    }
    for (const auto& k : mkeys) {
      const auto& v = summary.memory[k];
      h5::write(f, "memory/" + k, std::vector<std::int64_t>(v.begin(), v.end()), {hsize_t(nranks)}, "B");
    }
    for (int o = 0; o < nops; ++o) {
      std::vector<std::int64_t> b(std::size_t(nsteps) * nranks);  // [steps, ranks]
      const auto at = [&](int r, int s) { return std::int64_t(bytes_all[(std::size_t(r) * (nsteps + 1) + s) * nops + o]); };
      for (int s = 0; s < nsteps; ++s)
        for (int r = 0; r < nranks; ++r) b[std::size_t(s) * nranks + r] = at(r, s);
      h5::write(f, "comm/" + ops[o] + "/bytes", b, {hsize_t(nsteps), hsize_t(nranks)}, "B");
      std::vector<std::int64_t> model(nranks);
      for (int r = 0; r < nranks; ++r) model[r] = at(r, nsteps);
      h5::write(f, "comm/" + ops[o] + "/model_bytes", model, {hsize_t(nranks)}, "B per step");
    }
    for (int k = 0; k < ndirs; ++k) {
      std::vector<std::int64_t> b(std::size_t(nsteps) * nranks);  // [steps, ranks]
      for (int s = 0; s < nsteps; ++s)
        for (int r = 0; r < nranks; ++r)
          b[std::size_t(s) * nranks + r] = std::int64_t(moved_all[(std::size_t(r) * nsteps + s) * ndirs + k]);
      h5::write(f, "offload/bytes_" + dirs[k], b, {hsize_t(nsteps), hsize_t(nranks)}, "B");
    }
    {
      std::vector<std::int64_t> a(std::size_t(nsteps) * nranks);  // [steps, ranks]
      for (int s = 0; s < nsteps; ++s)
        for (int r = 0; r < nranks; ++r) a[std::size_t(s) * nranks + r] = std::int64_t(alloc_all[r * nal + s]);
      h5::write(f, "memory/plan/allocations_per_step", a, {hsize_t(nsteps), hsize_t(nranks)}, "1");
      for (const auto& [k, v] : summary.plan)
        h5::write(f, "memory/plan/" + k, std::vector<std::int64_t>(v.begin(), v.end()), {hsize_t(nranks)}, "B");
    }
    for (const auto& [k, v] : summary.memory_model)
      h5::write(f, "memory/model/" + k, std::vector<std::int64_t>(v.begin(), v.end()), {hsize_t(nranks)}, "B");
  }
  file.commit();
  return summary;
}

}  // namespace minilst
