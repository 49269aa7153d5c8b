#include "results/json_summary.hpp"

#include "io/atomic_write.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>

namespace minilst {

namespace {
using Json = nlohmann::ordered_json;

// A text attribute, or null where the run did not record it.
Json text_or_null(const RunAttributes& a, const std::string& key) {
  const auto it = a.text.find(key);
  return it == a.text.end() ? Json() : Json(it->second);
}
Json integer_or_null(const RunAttributes& a, const std::string& key) {
  const auto it = a.integers.find(key);
  return it == a.integers.end() ? Json() : Json(it->second);
}
// A text attribute that holds a whole number (memory_bytes, cpu_cores), as a number.
Json number_text_or_null(const RunAttributes& a, const std::string& key) {
  const auto it = a.text.find(key);
  if (it == a.text.end()) return Json();
  try {
    return Json(std::stoll(it->second));
  } catch (...) {
    return Json(it->second);
  }
}
Json number_or_null(bool known, double x) { return known ? Json(x) : Json(); }

template <class V>
V max_of(const std::vector<V>& v) {
  return v.empty() ? V{} : *std::max_element(v.begin(), v.end());
}
}  // namespace

std::string json_summary_problem(const std::string& metrics_path, bool overwrite) {
  const std::string path = json_summary_path(metrics_path);
  for (const auto& name : {path, path + ".partial"})
    if (const auto problem = rename_target_problem(name); !problem.empty()) return "its JSON summary: " + problem;
  std::error_code ec;
  if (overwrite || !std::filesystem::exists(path, ec)) return "";
  bool ours = false;
  try {
    std::ifstream in(path);
    const Json found = Json::parse(in);
    ours = found.is_object() && found.contains("schema") && found["schema"] == "minilst-summary";
  } catch (const std::exception&) {  // not JSON: not ours
  }
  if (ours) return "";
  return "its JSON summary '" + path + "' exists and is not a miniLST summary: not overwritten (choose another "
         "name, remove it, or set output.overwrite: true)";
}

namespace {
// Where each rank ran (the `placement` attribute: JSON text), or null.
Json placement_or_null(const RunAttributes& a) {
  const auto it = a.text.find("placement");
  if (it == a.text.end()) return Json();
  try {
    return Json::parse(it->second);
  } catch (const std::exception&) {
    return Json();
  }
}

// Where the run ran (Adiak-style keys).
Json machine_json(const RunAttributes& a) {
  return Json{{"hostname", text_or_null(a, "hostname")},
              {"hostlist", text_or_null(a, "hostlist")},
              {"numhosts", number_text_or_null(a, "numhosts")},
              {"cpu_model", text_or_null(a, "cpu_model")},
              {"cpu_isa", text_or_null(a, "cpu_isa")},
              {"cpu_cores", number_text_or_null(a, "cpu_cores")},
              {"cpu_threads", number_text_or_null(a, "cpu_threads")},
              {"memory_bytes", number_text_or_null(a, "memory_bytes")},
              {"gpu", text_or_null(a, "gpu")},
              {"gpu_driver_version", text_or_null(a, "gpu_driver_version")},
              {"cuda_driver_version", text_or_null(a, "cuda_driver_version")},
              {"kokkos_threads", integer_or_null(a, "kokkos_threads")},
              {"blas_threads", integer_or_null(a, "blas_threads")},
              {"cores_shared", text_or_null(a, "cores_shared")},
              {"cores_shared_note", text_or_null(a, "cores_shared_note")},
              {"placement", placement_or_null(a)}};
}

// How the program was built.
Json build_json(const RunAttributes& a) {
  return Json{{"version", text_or_null(a, "version")},
              {"git_commit", text_or_null(a, "git_commit")},
              {"git_dirty", a.text.count("git_dirty") ? Json(a.text.at("git_dirty") == "true") : Json()},
              {"cmake_build_type", text_or_null(a, "cmake_build_type")},
              {"compiler", text_or_null(a, "compiler")},
              {"kokkos_version", text_or_null(a, "kokkos_version")},
              {"kokkos_devices", text_or_null(a, "kokkos_devices")},
              {"blas", text_or_null(a, "blas")}};
}

// The batch job and the command.
Json job_json(const RunAttributes& a) {
  return Json{{"launchdate", number_text_or_null(a, "launchdate")},  // Adiak's: seconds since the epoch
              {"launchdate_utc", text_or_null(a, "launchdate_utc")},
              {"slurm_job_id", text_or_null(a, "SLURM_JOB_ID")},
              {"slurm_array_job_id", text_or_null(a, "SLURM_ARRAY_JOB_ID")},
              {"slurm_array_task_id", text_or_null(a, "SLURM_ARRAY_TASK_ID")},
              {"cmdline", text_or_null(a, "cmdline")}};
}

// The step time predicted on run.machine beside the measured (the busiest rank's mean per
// measured step) and their ratio predicted / measured; null where no step was measured.
Json prediction_json(const RunSummary& s) {
  const auto& p = s.prediction;
  const auto value_or_null = [](const std::optional<double>& v) { return v ? Json(*v) : Json(); };
  Json phases = Json::object(), ratios = Json::object();
  for (const Phase phase : all_of<Phase>()) {
    if (!priced_phase(phase)) continue;
    phases[name_of(phase)] = p.time.phases[phase];
    ratios[name_of(phase)] = value_or_null(s.prediction_ratio[phase]);
  }
  return Json{{"machine", {{"name", p.machine}, {"kind", p.kind}, {"file", p.file}, {"digest", p.digest}}},
              {"step_s", p.time.phases[Phase::step]},
              {"measured_step_s", value_or_null(s.prediction_measured[Phase::step])},
              {"ratio", value_or_null(s.prediction_ratio[Phase::step])},
              {"phases_s", phases},
              {"ratios", ratios}};
}
}  // namespace

Json run_summary_json(const GatheredMetrics& g, const RunSummary& s, const RunMetrics& m, const std::string& path) {
  const auto& a = m.attributes;
  Json j;
  j["schema"] = "minilst-summary";
  j["schema_version"] = 1;
  j["run_name"] = text_or_null(a, "run_name");
  j["metrics_file"] = path;
  j["verdict"] = run_verdict(m.complete, s.valid);  // the spellings of every output (results/run_rules.hpp)
  j["exit_code"] = verdict_exit_code(m.complete, s.valid);
  j["stop_reason"] = m.stop_reason;
  j["reportable"] = s.reportable.word();
  j["reportable_reasons"] = s.reportable.reasons;
  j["reference_check"] = s.reference_check;
  j["fom"] = {{"value", s.fom}, {"unit", "tokens/s per rank"}};
  j["tokens_per_s"] = s.fom * g.nranks;
  j["mfu"] = number_or_null(s.mfu_known, s.mfu);  // the model-FLOPs convention
  Json mfu = Json::object();
  for (const FlopsConvention f : all_of<FlopsConvention>()) mfu[name_of(f)] = number_or_null(s.mfu_known, s.mfu_conventions[f]);
  j["mfu_conventions"] = mfu;  // predict/flops.hpp: model, hardware (recompute counted), square (attention as S^2)
  j["steps_done"] = g.nsteps;
  j["warmup_steps"] = m.warmup_steps;
  j["measured_steps"] = s.measured_steps;
  std::vector<double> loss;
  for (const auto& st : m.steps) loss.push_back(st.loss);
  j["final_loss"] = loss.empty() ? Json() : Json(loss.back());
  j["loss"] = loss;
  j["step_seconds"] = s.slowest_step_seconds;  // each step's slowest rank
  j["layout"] = {{"ranks", g.nranks},
                 {"data_parallel", integer_or_null(a, "data_parallel")},
                 {"sequence_parallel", integer_or_null(a, "sequence_parallel")},
                 {"tensor_parallel", integer_or_null(a, "tensor_parallel")},
                 {"ulysses", integer_or_null(a, "ulysses")},
                 {"ring", integer_or_null(a, "ring")},
                 {"attention", text_or_null(a, "attention")},
                 {"memory_policy", text_or_null(a, "memory_policy")},
                 {"precision", text_or_null(a, "precision")},
                 {"seq_len", integer_or_null(a, "seq_len")},
                 {"zero_stage", integer_or_null(a, "zero_stage")}};
  j["deck"] = {{"path", text_or_null(a, "deck")}, {"problem_digest", text_or_null(a, "problem_digest")}};
  j["machine"] = machine_json(a);
  j["build"] = build_json(a);
  j["job"] = job_json(a);
  Json phases = Json::object();  // mean over ranks of each rank's mean over the measured steps
  for (const Phase phase : all_of<Phase>()) {
    const auto& per_rank = s.phase_avg_per_rank[phase];
    const double mean = per_rank.empty() ? 0.0 : std::accumulate(per_rank.begin(), per_rank.end(), 0.0) / per_rank.size();
    if (mean > 0) phases[name_of(phase)] = mean;
  }
  j["timings_s"] = phases;
  Json memory = Json::object(), model = Json::object(), comm = Json::object();  // max over ranks
  for (const auto& [k, v] : s.memory) memory[k] = max_of(v);
  for (const auto& [k, v] : s.memory_model) model[k] = max_of(v);
  for (const CommOp op : metric_comm_ops())
    if (max_of(s.comm_bytes[op]) > 0) comm[name_of(op)] = max_of(s.comm_bytes[op]);
  j["memory_bytes"] = memory;
  j["memory_model_bytes"] = model;
  j["comm_bytes_per_step"] = comm;
  j["attention_flops_per_step"] = s.attention_flops.empty() ? Json() : Json(s.attention_flops);  // [ranks]
  j["attention_imbalance"] = number_or_null(s.attention_imbalance > 0, s.attention_imbalance);
  const auto slurm = a.reals.find("slurm_energy_joules");
  j["energy"] = {{"source", s.energy_source},
                 {"note", s.energy_note},
                 {"joules_measured_steps", number_or_null(s.energy_known, s.energy_joules)},
                 {"joules_run", number_or_null(s.energy_known, s.energy_joules_run)},
                 {"tokens_per_joule", number_or_null(s.energy_known && s.tokens_per_joule > 0, s.tokens_per_joule)},
                 {"slurm_joules", slurm == a.reals.end() ? Json() : Json(slurm->second)}};
  if (s.prediction.known()) j["prediction"] = prediction_json(s);  // run.machine only
  return j;
}

void write_json_summary(const std::string& path, const Json& summary, const std::string& partial_suffix) {
  const std::string text = summary.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  write_file_atomically(path, text.data(), text.size(), partial_suffix);
}

void write_json_summary_beside(const std::string& metrics_path, const GatheredMetrics& gathered,
                               const RunSummary& summary, const RunMetrics& local, const std::string& partial_suffix) {
  const std::string json = json_summary_path(metrics_path);
  try {
    write_json_summary(json, run_summary_json(gathered, summary, local, metrics_path), partial_suffix);
  } catch (const OutputTaken&) {
    throw;  // the name is another's: the caller moves both files to a sibling
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: the JSON summary beside %s was not written: %s\n", metrics_path.c_str(), e.what());
    remove_if_owned(json, Owned::written_or_approved);  // an earlier summary (this run's, or an earlier run's): it would mislead
  }
}

}  // namespace minilst
