#include "results/metrics.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <numeric>
#include <stdexcept>

#include "core/phases.hpp"
#include "io/h5.hpp"
#include "memory/tracker.hpp"

namespace minilst {

const std::vector<std::string>& metric_offload_directions() {
  static const std::vector<std::string> directions = {"to_host", "to_device"};
  return directions;
}

const std::vector<CommOp>& metric_comm_ops() {
  static const std::vector<CommOp> ops = [] {
    std::vector<CommOp> v;
    for (const CommOp op : all_of<CommOp>())
      if (step_op(op)) v.push_back(op);
    return v;
  }();
  return ops;
}

namespace {
std::vector<std::string> memory_keys() {
  std::vector<std::string> keys;
  for (int c = 0; c < kNumMemCategories; ++c) keys.push_back(category_name(MemCategory(c)));
  keys.push_back("device_total");
  return keys;
}

const std::vector<std::string>& attention_keys() {
  static const std::vector<std::string> keys = {"flops_forward", "flops_backward", "bytes_forward", "bytes_backward"};
  return keys;
}

const std::vector<std::string>& plan_keys() {
  static const std::vector<std::string> keys = {"arena_bytes", "lower_bound_bytes", "unplanned_peak_bytes",
                                                "model_arena_bytes"};
  return keys;
}

template <class V> MPI_Datatype mpi_type();
template <> MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <> MPI_Datatype mpi_type<std::uint64_t>() { return MPI_UINT64_T; }

// Every rank's [rows, keys] table (value(row, k) on each rank, for the keys' indices k), on every
// rank, as [keys][rows x ranks], row-major. Collective (an all-gather).
template <class V, class Value>
std::vector<std::vector<V>> allgather_table(MPI_Comm comm, std::size_t nk, int rows, Value value) {
  int nranks = 1;
  MPI_Comm_size(comm, &nranks);
  const std::size_t per_rank = std::size_t(rows) * nk;
  std::vector<V> mine(per_rank), all(per_rank * nranks);
  for (int row = 0; row < rows; ++row)
    for (std::size_t k = 0; k < nk; ++k) mine[row * nk + k] = value(row, k);
  MPI_Allgather(mine.data(), int(per_rank), mpi_type<V>(), all.data(), int(per_rank), mpi_type<V>(), comm);
  std::vector<std::vector<V>> out(nk);
  for (std::size_t k = 0; k < nk; ++k) {
    auto& v = out[k];
    v.resize(std::size_t(rows) * nranks);
    for (int row = 0; row < rows; ++row)
      for (int r = 0; r < nranks; ++r) v[std::size_t(row) * nranks + r] = all[std::size_t(r) * per_rank + row * nk + k];
  }
  return out;
}

// The same by name: key -> [rows x ranks].
template <class V, class Value>
std::map<std::string, std::vector<V>> allgather_by_key(MPI_Comm comm, const std::vector<std::string>& keys, int rows,
                                                       Value value) {
  auto table = allgather_table<V>(comm, keys.size(), rows, [&](int row, std::size_t k) { return value(row, keys[k]); });
  std::map<std::string, std::vector<V>> out;
  for (std::size_t k = 0; k < keys.size(); ++k) out[keys[k]] = std::move(table[k]);
  return out;
}

// One value per comm operation of a step: op -> [rows x ranks].
template <class V, class Value>
EnumMap<CommOp, std::vector<V>> allgather_comm(MPI_Comm comm, Value value) {
  const auto& ops = metric_comm_ops();
  auto table = allgather_table<V>(comm, ops.size(), 1, [&](int, std::size_t k) { return V(value(ops[k])); });
  EnumMap<CommOp, std::vector<V>> out;
  for (std::size_t k = 0; k < ops.size(); ++k) out[ops[k]] = std::move(table[k]);
  return out;
}

template <class M>
typename M::mapped_type get_or_zero(const M& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? typename M::mapped_type{} : it->second;
}

std::vector<std::int64_t> as_int64(const std::vector<std::uint64_t>& v) { return {v.begin(), v.end()}; }

}  // namespace

GatheredMetrics gather_step(MPI_Comm comm, const StepMetrics& step) {
  GatheredMetrics g;
  MPI_Comm_size(comm, &g.nranks);
  auto seconds = allgather_table<double>(comm, count_of<Phase>(), 1, [&](int, std::size_t p) { return step.seconds[Phase(p)]; });
  for (const Phase p : all_of<Phase>()) g.seconds[p] = std::move(seconds[std::size_t(p)]);
  g.comm_bytes = allgather_comm<std::uint64_t>(comm, [&](CommOp op) { return step.comm_bytes[op]; });
  g.offload_bytes = allgather_by_key<std::uint64_t>(comm, metric_offload_directions(), 1, [&](int, const std::string& d) {
    return get_or_zero(step.offload_bytes, d);
  });
  const auto allocations = allgather_by_key<std::uint64_t>(comm, {"allocations"}, 1,
                                                           [&](int, const std::string&) { return step.allocations; });
  g.allocations = allocations.at("allocations");
  g.energy = allgather_by_key<double>(comm, {"energy"}, 1, [&](int, const std::string&) { return step.energy_joules; })
                 .at("energy");
  g.nsteps = 1;
  return g;
}

void append_steps(GatheredMetrics& to, const GatheredMetrics& from) {
  const auto append = [](auto& a, const auto& b) {
    for (const auto& [key, values] : b) a[key].insert(a[key].end(), values.begin(), values.end());
  };
  for (const Phase p : all_of<Phase>()) to.seconds[p].insert(to.seconds[p].end(), from.seconds[p].begin(), from.seconds[p].end());
  for (const CommOp op : metric_comm_ops())
    to.comm_bytes[op].insert(to.comm_bytes[op].end(), from.comm_bytes[op].begin(), from.comm_bytes[op].end());
  append(to.offload_bytes, from.offload_bytes);
  to.allocations.insert(to.allocations.end(), from.allocations.begin(), from.allocations.end());
  to.energy.insert(to.energy.end(), from.energy.begin(), from.energy.end());
  to.nranks = from.nranks;
  to.nsteps += from.nsteps;
}

void gather_totals(MPI_Comm comm, const RunMetrics& local, GatheredMetrics& g) {
  MPI_Comm_size(comm, &g.nranks);
  g.comm_model = allgather_comm<std::uint64_t>(comm, [&](CommOp op) { return local.comm_model[op]; });
  g.memory = allgather_by_key<std::uint64_t>(comm, memory_keys(), 1,
                                             [&](int, const std::string& k) { return get_or_zero(local.memory, k); });
  g.memory_model = allgather_by_key<std::uint64_t>(comm, memory_keys(), 1, [&](int, const std::string& k) {
    return get_or_zero(local.memory_model, k);
  });
  g.plan = allgather_by_key<std::uint64_t>(comm, plan_keys(), 1,
                                           [&](int, const std::string& k) { return get_or_zero(local.plan, k); });
  g.attention = allgather_by_key<double>(comm, attention_keys(), 1,
                                         [&](int, const std::string& k) { return get_or_zero(local.attention, k); });
  // [R] each, the same R on every rank: gathered as [R x ranks], kept as [ranks x R]
  const int R = int(local.attention_hop_flops.size());
  const auto hops = allgather_by_key<double>(comm, {"hop_flops", "hop_bytes"}, R, [&](int t, const std::string& k) {
    return (k == "hop_flops" ? local.attention_hop_flops : local.attention_hop_bytes).at(t);
  });
  for (const auto& [k, v] : hops) {
    auto& out = g.attention[k];
    out.assign(v.size(), 0.0);
    for (int t = 0; t < R; ++t)
      for (int r = 0; r < g.nranks; ++r) out[std::size_t(r) * R + t] = v[std::size_t(t) * g.nranks + r];
  }
}

namespace {
// The losses against the deck's reference answer (every step done that it lists): true when
// there is none or every step is within reference_rtol.
bool check_reference(RunSummary& summary, const RunMetrics& local) {
  if (local.expected_loss.empty()) return true;
  summary.reference_steps = int(std::min(local.expected_loss.size(), local.steps.size()));
  for (int s = 0; s < summary.reference_steps; ++s) {
    const double expected = local.expected_loss[s];
    const double err = std::abs(local.steps[s].loss - expected) / std::max(std::abs(expected), 1e-300);
    if (!(err <= summary.reference_max_rel_error)) {  // NaN counts as worst
      summary.reference_max_rel_error = std::isnan(err) ? HUGE_VAL : err;
      summary.reference_worst_step = s + 1;
    }
  }
  const bool ok = summary.reference_steps > 0 && summary.reference_max_rel_error <= local.reference_rtol;
  summary.reference_check = ok ? "PASSED" : "FAILED";
  return ok;
}

// The energy of the measured steps and of the whole run over every rank's meters, and tokens per joule.
void summarise_energy(RunSummary& summary, const GatheredMetrics& g, const RunMetrics& local, int first) {
  summary.energy_known = local.energy_source != "unavailable";
  summary.energy_source = local.energy_source;
  summary.energy_note = local.energy_note;
  if (!summary.energy_known) return;
  for (int s = 0; s < g.nsteps; ++s)
    for (int r = 0; r < g.nranks; ++r) {
      const double joules = g.energy[std::size_t(s) * g.nranks + r];
      summary.energy_joules_run += joules;
      if (s >= first) summary.energy_joules += joules;
    }
  if (summary.energy_joules > 0)
    summary.tokens_per_joule = local.tokens_per_step * double(g.nsteps - first) / summary.energy_joules;
}
}  // namespace

namespace {
// The prediction beside the busiest rank's mean of each phase (Max time/rank), and their ratio
// predicted / measured where a step was measured and the phase took time.
void summarise_prediction(RunSummary& summary, const PredictedTime& prediction) {
  summary.prediction = prediction;
  if (summary.measured_steps == 0 || !prediction.known()) return;
  for (const Phase phase : all_of<Phase>()) {
    const auto& avg = summary.phase_avg_per_rank[phase];
    if (!priced_phase(phase) || avg.empty()) continue;
    const double measured = *std::max_element(avg.begin(), avg.end());
    summary.prediction_measured[phase] = measured;
    if (measured > 0) summary.prediction_ratio[phase] = prediction.time.phases[phase] / measured;
  }
}
}  // namespace

RunSummary summarise_metrics(const GatheredMetrics& g, const RunMetrics& local) {
  RunSummary summary;
  const int nsteps = g.nsteps, nranks = g.nranks;
  const int first = std::min(local.warmup_steps, nsteps), measured = nsteps - first;
  bool valid = measured > 0;
  for (const auto& st : local.steps) valid = valid && std::isfinite(st.loss) && std::isfinite(st.grad_norm);
  summary.valid = valid && check_reference(summary, local);
  const auto& step = g.seconds[Phase::step];
  double measured_seconds = 0;  // sum over measured steps of the slowest rank's step time
  for (int s = 0; s < nsteps; ++s) {
    const double slowest = *std::max_element(step.begin() + std::ptrdiff_t(s) * nranks, step.begin() + std::ptrdiff_t(s + 1) * nranks);
    summary.slowest_step_seconds.push_back(slowest);
    if (s >= first) measured_seconds += slowest;
  }
  summary.fom = measured_seconds > 0 ? local.tokens_per_step * measured / measured_seconds / nranks : 0.0;
  const auto utilisation = [&](double gflops_per_rank) {  // the measured steps' model FLOP/s over ranks x rate
    return measured_seconds > 0 && gflops_per_rank > 0
               ? local.flops_per_step * measured / measured_seconds / (double(nranks) * gflops_per_rank * 1e9)
               : 0.0;
  };
  summary.peak_gflops = local.peak_gflops;
  summary.nominal_peak_gflops = local.nominal_peak_gflops;
  summary.mfu_peak_gflops = local.mfu_peak_gflops;
  summary.mfu_known = measured_seconds > 0 && local.mfu_peak_gflops > 0;
  summary.mfu = utilisation(local.mfu_peak_gflops);
  summary.mfu_nominal = utilisation(local.nominal_peak_gflops);
  for (const FlopsConvention f : all_of<FlopsConvention>())
    summary.mfu_conventions[f] = local.flops_per_step > 0 ? summary.mfu * local.flops[f] / local.flops_per_step : 0.0;
  const auto mean_measured = [&](const auto& per_step, int r) {  // [steps x ranks] -> rank r's mean over measured steps
    double sum = 0;
    for (int s = first; s < nsteps; ++s) sum += double(per_step[std::size_t(s) * nranks + r]);
    return measured > 0 ? sum / measured : 0.0;
  };
  for (const Phase phase : all_of<Phase>())
    for (int r = 0; r < nranks; ++r) summary.phase_avg_per_rank[phase].push_back(mean_measured(g.seconds[phase], r));
  for (const Phase phase : {Phase::attention, Phase::mlp, Phase::lm_head}) {  // this rank's FLOPs of the phase over its mean time
    const auto flops = local.attributes.reals.find("flops_per_step_" + name_of(phase));
    const auto& t = summary.phase_avg_per_rank[phase];
    const double seconds = std::accumulate(t.begin(), t.end(), 0.0) / double(nranks);
    if (flops != local.attributes.reals.end() && seconds > 0 && local.mfu_peak_gflops > 0)
      summary.mfu_phase[phase] = flops->second / seconds / (local.mfu_peak_gflops * 1e9);
  }
  for (const CommOp op : metric_comm_ops())
    for (int r = 0; r < nranks; ++r) summary.comm_bytes[op].push_back(mean_measured(g.comm_bytes[op], r));
  summary.memory = g.memory;
  for (const auto& [k, v] : g.memory_model)
    if (local.memory_model.count(k)) summary.memory_model[k] = v;
  if (!local.plan.empty()) summary.plan = g.plan;
  for (int r = 0; r < nranks; ++r) {
    std::uint64_t most = 0;
    for (int s = 1; s < nsteps; ++s) most = std::max(most, g.allocations[std::size_t(s) * nranks + r]);
    summary.allocations_after_first.push_back(most);
  }
  summarise_energy(summary, g, local, first);
  if (g.attention.count("flops_forward")) {  // max / mean over ranks of a step's attention FLOPs
    for (int r = 0; r < nranks; ++r)
      summary.attention_flops.push_back(g.attention.at("flops_forward")[r] + g.attention.at("flops_backward")[r]);
    const double mean = std::accumulate(summary.attention_flops.begin(), summary.attention_flops.end(), 0.0) / nranks;
    if (mean > 0) summary.attention_imbalance = *std::max_element(summary.attention_flops.begin(), summary.attention_flops.end()) / mean;
  }
  summary.measured_steps = measured;
  summarise_prediction(summary, local.prediction);
  RunRuleFacts rules = local.rules;
  rules.valid = summary.valid;
  rules.complete = local.complete;
  rules.measured_steps = measured;
  rules.steps_done = nsteps;
  rules.warmup_steps = local.warmup_steps;
  rules.reference_check = summary.reference_check;
  rules.mfu = summary.mfu_known ? summary.mfu : -1;
  summary.reportable = check_run_rules(rules);
  return summary;
}

std::string result_line(const std::string& verdict, double fom, std::size_t steps, double final_loss, int nranks,
                        double mfu, const std::string& tier, const std::string& reportable, const std::string& path) {
  char numbers[200], utilisation[40] = "";
  if (mfu >= 0) std::snprintf(utilisation, sizeof utilisation, " MFU=%.3f", mfu);
  std::snprintf(numbers, sizeof numbers, " FOM=%.1f tokens/s/rank steps=%zu final_loss=%.6f ranks=%d%s", fom, steps,
                final_loss, nranks, utilisation);
  return "RESULT: " + verdict + numbers + (tier.empty() ? "" : " tier=" + tier) +
         (reportable.empty() ? "" : " reportable=" + reportable) + " metrics=" + path;
}

namespace {
constexpr unsigned kReadSeconds = 20;                      // a metrics file's verdict reads in milliseconds
constexpr std::size_t kReadMemory = std::size_t(4) << 30;  // far more than its attributes and loss need
constexpr std::size_t kMaxSteps = std::size_t(1) << 26;    // a longer /loss is a corrupt dataspace
constexpr double kMaxRanks = double(1 << 24);

std::string quoted(const std::string& path) { return "'" + h5::printable(path) + "'"; }

// A file that is not a metrics file at all (its message says so; not "unreadable").
struct NotMetrics : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What the file system tells before HDF5 is asked: missing, a directory, not a regular
// file (a pipe would block the reader), not readable, empty.
void check_result_path(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw std::runtime_error(quoted(path) + ": " + (errno == ENOENT ? "no such file" : std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw std::runtime_error(quoted(path) + " is a directory, not a metrics file");
  if (!S_ISREG(st.st_mode))
    throw std::runtime_error(quoted(path) + " is not a regular file (a device, pipe or socket), not a metrics file");
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error(quoted(path) + " cannot be read: " + std::strerror(errno));
  ::close(fd);
  if (st.st_size == 0) throw std::runtime_error(quoted(path) + " is empty (0 bytes), not a metrics file");
}

// A string attribute that must be one of `allowed` (the writer's only values).
std::string choice_attr(hid_t f, const std::string& name, std::initializer_list<const char*> allowed) {
  const std::string value = h5::read_string_attr(f, name);
  std::string listed;
  for (const char* a : allowed) {
    if (value == a) return value;
    listed += std::string(listed.empty() ? "" : " or ") + a;
  }
  throw std::runtime_error("attribute '" + name + "' is '" + h5::printable(value.substr(0, 40)) + "', not " + listed);
}

// A number attribute that must be a whole number in [1, kMaxRanks] (a rank count).
double rank_count_attr(hid_t f, const std::string& name) {
  const double v = h5::read_number_attr(f, name);
  if (!(v >= 1 && v <= kMaxRanks && v == std::floor(v)))
    throw std::runtime_error("attribute '" + name + "' is " + std::to_string(v) + ", not a rank count");
  return v;
}

// The verdict of an open metrics file: its RESULT line and its run's exit code. Every
// value is checked against what the writer writes, so a corrupt one is named.
std::pair<std::string, int> verdict_of(hid_t f, const std::string& path) {
  const bool complete = choice_attr(f, "complete", {"true", "false"}) == "true";
  const bool valid = choice_attr(f, "valid", {"PASSED", "FAILED"}) == "PASSED";
  const auto loss = h5::read_doubles(f, "loss", kMaxSteps);
  const double ranks = rank_count_attr(f, "data_parallel") * rank_count_attr(f, "sequence_parallel");
  if (ranks > kMaxRanks) throw std::runtime_error("data_parallel x sequence_parallel is more than 2^24 ranks");
  std::string verdict = run_verdict(complete, valid);
  if (!complete) verdict += " (" + h5::printable(h5::read_string_attr(f, "stop_reason")) + ")";
  const double mfu = h5::has_attr(f, "mfu") ? h5::read_number_attr(f, "mfu") : -1.0;  // files before MFU: none
  std::string reportable;  // files before the run rules: none
  if (h5::has_attr(f, "reportable")) {
    reportable = choice_attr(f, "reportable", {"yes", "no"});
    if (reportable != "yes") reportable += " (" + h5::printable(h5::read_string_attr(f, "reportable_reasons")) + ")";
  }
  const std::string tier = h5::has_attr(f, "tier") ? h5::printable(h5::read_string_attr(f, "tier")) : "";  // older files: none
  return {result_line(verdict, h5::read_number_attr(f, "fom"), loss.size(), loss.empty() ? 0.0 : loss.back(),
                      int(ranks), mfu, tier, reportable, path),
          verdict_exit_code(complete, valid)};
}

// In the reading process: the file opened as HDF5, its schema checked, its verdict read.
std::pair<std::string, int> read_result(const std::string& path) {
  const htri_t hdf5 = H5Fis_hdf5(path.c_str());
  if (hdf5 == 0) throw NotMetrics(quoted(path) + " is not an HDF5 file, not a metrics file");
  try {
    if (hdf5 < 0) throw std::runtime_error("HDF5 cannot look for its signature (" + h5::innermost_error() + ")");
    const h5::Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "open it");
    if (!h5::has_attr(file.id(), "schema"))
      throw NotMetrics(quoted(path) + " is not a miniLST metrics file (HDF5 without a schema attribute)");
    const std::string schema = h5::read_string_attr(file.id(), "schema");
    if (schema != "minilst-metrics")
      throw NotMetrics(quoted(path) + " is not a miniLST metrics file (its schema is '" +
                       h5::printable(schema.substr(0, 40)) + "')");
    return verdict_of(file.id(), path);
  } catch (const NotMetrics&) {
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error(quoted(path) + " is unreadable: " + e.what());
  }
}
}  // namespace

std::pair<std::string, int> result_of_file(const std::string& path) {
  check_result_path(path);
  h5::silence_errors();
  // Read in a child process: HDF5 itself can crash on a corrupt file (a reply "<code><line>").
  const std::string reply = h5::read_isolated(
      path,
      [&path] {
        const auto [line, code] = read_result(path);
        return std::to_string(code) + line;
      },
      kReadSeconds, kReadMemory);
  return {reply.substr(1), reply[0] - '0'};
}

namespace {
// /predicted/<phase> (run.machine): a sibling of /timings, not inside it, so that readers that take
// every member of /timings for a [steps, ranks] dataset stay right. Each a scalar, s per step, with
// `measured` (the busiest rank's mean) and `ratio` (predicted / measured) where a step was measured.
void write_prediction(hid_t f, const RunSummary& summary) {
  const auto& p = summary.prediction;
  if (!p.known()) return;
  for (const Phase phase : all_of<Phase>()) {
    if (!priced_phase(phase)) continue;
    const std::string name = "predicted/" + name_of(phase);
    h5::write(f, name, std::vector<double>{p.time.phases[phase]}, std::vector<hsize_t>{}, "s per step (predicted, busiest rank)");
    const auto ds = h5::Handle(H5Dopen2(f, name.c_str(), H5P_DEFAULT), H5Dclose, "open " + name);
    if (const auto& m = summary.prediction_measured[phase]) h5::attr(ds.id(), "measured", *m);
    if (const auto& r = summary.prediction_ratio[phase]) h5::attr(ds.id(), "ratio", *r);  // predicted / measured
  }
  const auto group = h5::group(f, "/predicted");
  h5::attr(group.id(), "machine", p.machine);
  h5::attr(group.id(), "machine_kind", p.kind);
  h5::attr(group.id(), "machine_file", p.file);
  h5::attr(group.id(), "machine_digest", p.digest);
  if (!p.text.empty()) h5::attr(group.id(), "machine_yaml", p.text);  // measured at start: the file itself
}
}  // namespace

namespace {
// The root attributes: what the run is, its verdict, its figures of merit and their denominators.
void write_root_attributes(hid_t f, const GatheredMetrics& g, const RunSummary& summary, const RunMetrics& local) {
  h5::attr(f, "schema", std::string("minilst-metrics"));
  h5::attr(f, "schema_version", std::int64_t(1));
  // PASSED only for a VALID run: a file of a stopped run (or flushed during one) says FAILED, as its verdict is not VALID
  h5::attr(f, "valid", std::string(summary.valid && local.complete ? "PASSED" : "FAILED"));
  h5::attr(f, "verdict", std::string(run_verdict(local.complete, summary.valid)));  // as RESULT, JSON, MLPerf say it
  h5::attr(f, "complete", std::string(local.complete ? "true" : "false"));
  h5::attr(f, "stop_reason", local.stop_reason);
  h5::attr(f, "steps_done", std::int64_t(g.nsteps));
  h5::attr(f, "fom", summary.fom);
  h5::attr(f, "fom_unit", std::string("tokens/s per rank"));
  h5::attr(f, "config", local.config_yaml);
  h5::attr(f, "warmup_steps", std::int64_t(local.warmup_steps));
  std::string phases;  // the phases of /timings in their order: what readers in analysis/ iterate
  for (const Phase phase : all_of<Phase>()) phases += (phases.empty() ? "" : " ") + name_of(phase);
  h5::attr(f, "phases", phases);
  for (const auto& [k, v] : local.attributes.text) h5::attr(f, k, v);
  for (const auto& [k, v] : local.attributes.integers) h5::attr(f, k, v);
  for (const auto& [k, v] : local.attributes.reals) h5::attr(f, k, v);
  h5::attr(f, "tokens_per_step", local.tokens_per_step);
  h5::attr(f, "flops_per_step", local.flops_per_step);
  h5::attr(f, "peak_gflops_per_rank", local.peak_gflops);  // this run's GEMM rate (gemm_peak.hpp)
  h5::attr(f, "mfu_peak_gflops_per_rank", local.mfu_peak_gflops);  // MFU's fixed peak (mfu_peak.hpp)
  if (summary.mfu_known) {  // absent: no measured step or no rate (the RESULT line then has no MFU)
    h5::attr(f, "mfu", summary.mfu);  // the model-FLOPs convention (predict/flops.hpp)
    for (const FlopsConvention c : all_of<FlopsConvention>()) {
      h5::attr(f, "mfu_" + name_of(c), summary.mfu_conventions[c]);
      h5::attr(f, "flops_per_step_" + name_of(c), local.flops[c]);
    }
    h5::attr(f, "mfu_convention", std::string(convention_text(FlopsConvention::model)));
    for (const Phase phase : all_of<Phase>())
      if (summary.mfu_phase[phase] > 0) h5::attr(f, "mfu_" + name_of(phase), summary.mfu_phase[phase]);
  }
  if (summary.mfu_known && local.nominal_peak_gflops > 0) {
    h5::attr(f, "nominal_peak_gflops_per_rank", local.nominal_peak_gflops);
    h5::attr(f, "mfu_nominal", summary.mfu_nominal);
  }
  h5::attr(f, "reference_check", summary.reference_check);
  h5::attr(f, "measured_steps", std::int64_t(summary.measured_steps));
  h5::attr(f, "reportable", std::string(summary.reportable.yes() ? "yes" : "no"));
  h5::attr(f, "reportable_reasons", summary.reportable.reasons_text());
  h5::attr(f, "energy_source", local.energy_source);
  h5::attr(f, "energy_note", local.energy_note);
  if (summary.energy_known) {
    h5::attr(f, "energy_joules", summary.energy_joules);
    h5::attr(f, "energy_joules_run", summary.energy_joules_run);
    if (summary.tokens_per_joule > 0) h5::attr(f, "tokens_per_joule", summary.tokens_per_joule);
  }
  if (!local.expected_loss.empty()) {
    h5::attr(f, "reference_rtol", local.reference_rtol);
    h5::attr(f, "reference_max_rel_error", summary.reference_max_rel_error);
    h5::attr(f, "reference_steps_compared", std::int64_t(summary.reference_steps));
    h5::write(f, "reference/loss", local.expected_loss, {hsize_t(local.expected_loss.size())}, "1");
  }
}

// /loss, /throughput/*: per step (each step timed on its slowest rank).
void write_steps(hid_t f, const GatheredMetrics& g, const RunSummary& summary, const RunMetrics& local) {
  const hsize_t steps = hsize_t(g.nsteps);
  std::vector<double> loss, tokens_per_s, tflops, mfu;
  for (const auto& st : local.steps) loss.push_back(st.loss);
  const double peak = local.mfu_peak_gflops * 1e9 * double(g.nranks);  // all ranks
  for (const double slowest : summary.slowest_step_seconds) {
    tokens_per_s.push_back(slowest > 0 ? local.tokens_per_step / slowest : 0.0);
    tflops.push_back(slowest > 0 ? local.flops_per_step / slowest / 1e12 : 0.0);
    mfu.push_back(slowest > 0 && peak > 0 ? local.flops_per_step / slowest / peak : 0.0);
  }
  h5::write(f, "loss", loss, {steps}, "1");
  h5::write(f, "throughput/tokens_per_s", tokens_per_s, {steps}, "tokens/s (all ranks)");
  h5::write(f, "throughput/model_tflops", tflops, {steps}, "TFLOP/s (all ranks)");
  h5::write(f, "throughput/mfu", mfu, {steps}, "1 (model FLOP/s over MFU's fixed peak, all ranks)");
}

// /attention/*: the attention work of every step and rank, and per ring hop.
void write_attention(hid_t f, const GatheredMetrics& g, const RunSummary& summary) {
  if (summary.attention_imbalance <= 0) return;  // every step does the run's attention work (its mask is fixed)
  const hsize_t steps = hsize_t(g.nsteps), ranks = hsize_t(g.nranks);
  h5::attr(f, "attention_imbalance", summary.attention_imbalance);
  for (const auto& k : attention_keys()) {
    std::vector<double> per_step;
    for (int s = 0; s < g.nsteps; ++s) per_step.insert(per_step.end(), g.attention.at(k).begin(), g.attention.at(k).end());
    const bool flops = k.rfind("flops", 0) == 0;
    h5::write(f, "attention/" + k, per_step, {steps, ranks}, flops ? "FLOP" : "B");
  }
  const hsize_t R = ranks > 0 ? hsize_t(g.attention.at("hop_flops").size()) / ranks : 0;
  h5::write(f, "attention/hop_flops", g.attention.at("hop_flops"), {ranks, R}, "FLOP per step (forward + backward)");
  h5::write(f, "attention/hop_bytes", g.attention.at("hop_bytes"), {ranks, R}, "B sent per step");
}
}  // namespace

void write_metrics_file(const std::string& path, const GatheredMetrics& g, const RunSummary& summary,
                        const RunMetrics& local, const std::string& partial_suffix) {
  const hsize_t steps = hsize_t(g.nsteps), ranks = hsize_t(g.nranks);
  h5::AtomicFile file(path, partial_suffix);
  const hid_t f = file.id();
  write_root_attributes(f, g, summary, local);
  write_steps(f, g, summary, local);
  for (const Phase phase : all_of<Phase>()) {
    const std::string name = "timings/" + name_of(phase);
    h5::write(f, name, g.seconds[phase], {steps, ranks}, "s");
    const auto& avg = summary.phase_avg_per_rank[phase];
    auto ds = h5::Handle(H5Dopen2(f, name.c_str(), H5P_DEFAULT), H5Dclose, "open " + name);
    h5::attr(ds.id(), "Min time/rank", *std::min_element(avg.begin(), avg.end()));
    h5::attr(ds.id(), "Max time/rank", *std::max_element(avg.begin(), avg.end()));
    h5::attr(ds.id(), "Avg time/rank", std::accumulate(avg.begin(), avg.end(), 0.0) / double(g.nranks));
  }
  for (const auto& [k, v] : summary.memory) h5::write(f, "memory/" + k, as_int64(v), {ranks}, "B");
  for (const CommOp op : metric_comm_ops()) {
    h5::write(f, "comm/" + name_of(op) + "/bytes", as_int64(g.comm_bytes[op]), {steps, ranks}, "B");
    h5::write(f, "comm/" + name_of(op) + "/model_bytes", as_int64(g.comm_model[op]), {ranks}, "B per step");
  }
  for (const auto& [dir, b] : g.offload_bytes) h5::write(f, "offload/bytes_" + dir, as_int64(b), {steps, ranks}, "B");
  h5::write(f, "memory/plan/allocations_per_step", as_int64(g.allocations), {steps, ranks}, "1");
  if (summary.energy_known)
    h5::write(f, "energy/joules", g.energy, {steps, ranks}, "J (read by each rank's meters: its node's CPU packages, its GPU)");
  for (const auto& [k, v] : summary.plan) h5::write(f, "memory/plan/" + k, as_int64(v), {ranks}, "B");
  for (const auto& [k, v] : summary.memory_model) h5::write(f, "memory/model/" + k, as_int64(v), {ranks}, "B");
  write_prediction(f, summary);
  write_attention(f, g, summary);
  file.commit();
}

}  // namespace minilst
