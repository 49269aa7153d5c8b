#include "predict/validation.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "io/deck.hpp"
#include "io/input_file.hpp"
#include "core/number_text.hpp"
#include "predict/machine_file.hpp"
#include "predict/prediction.hpp"

namespace minilst {

namespace {
struct TableReader {
  std::string path;
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw std::runtime_error("validation table " + path + ": " + key + ": " + why);
  }
  std::string text(const YAML::Node& n, const std::string& key, bool required = true) const {
    if (!n) {
      if (required) fail(key, "missing");
      return "";
    }
    if (!n.IsScalar()) fail(key, "expected a string");
    return n.Scalar();
  }
  double number(const YAML::Node& n, const std::string& key, double def = -1) const {
    if (!n) {
      if (def >= 0) return def;
      fail(key, "missing");
    }
    double v = 0;
    if (!n.IsScalar() || !parse_decimal(n.Scalar(), v)) fail(key, "expected a number");
    return v;
  }
  std::vector<std::string> texts(const YAML::Node& n, const std::string& key) const {
    std::vector<std::string> out;
    if (!n) return out;
    if (!n.IsSequence()) fail(key, "expected a list of key=value");
    for (const auto& s : n) out.push_back(text(s, key));
    return out;
  }
  PublishedFigure figure(const YAML::Node& n, const std::string& key) const {
    PublishedFigure f;
    f.kind = text(n["kind"], key + ".kind");
    if (f.kind != "time" && f.kind != "throughput" && f.kind != "mfu") fail(key + ".kind", "expected time, throughput or mfu");
    f.quantity = text(n["quantity"], key + ".quantity");
    f.value = number(n["value"], key + ".value");
    f.printed = text(n["printed"], key + ".printed");
    f.unit = text(n["unit"], key + ".unit");
    f.resolution = number(n["resolution"], key + ".resolution", 0);
    f.peak_tflops = number(n["peak_tflops"], key + ".peak_tflops", 0);
    return f;
  }
  ValidationRow row(const YAML::Node& n, const std::string& key) const {
    ValidationRow r;
    r.label = text(n["label"], key + ".label");
    r.deck = text(n["deck"], key + ".deck");
    r.ranks = int(number(n["ranks"], key + ".ranks"));
    r.machine = text(n["machine"], key + ".machine", false);
    r.reason = text(n["reason"], key + ".reason", false);
    r.overrides = texts(n["set"], key + ".set");
    r.machine_overrides = texts(n["machine_set"], key + ".machine_set");
    const auto figures = n["figures"];
    if (!figures || !figures.IsSequence() || figures.size() == 0) fail(key + ".figures", "expected a list of figures");
    for (std::size_t i = 0; i < figures.size(); ++i) r.figures.push_back(figure(figures[i], key + ".figures[" + std::to_string(i) + "]"));
    return r;
  }
};

// A step's FLOPs by Megatron-LM's formula (Narayanan et al. 2021): 96 B s l h^2 (1 + s / 6h + V / 16 l h),
// every layer recomputed once and attention as the full square, B sequences of s tokens.
double megatron_flops(const ModelConfig& c, double s, double B) {
  const double l = c.layers, h = c.hidden, V = c.vocab;
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double flops_by(const std::string& formula, const Deck& deck, const StepFlops& flops, int ranks) {
  if (formula == "megatron") {
    const double sequences = double(deck.run.grad_accum) * ranks / deck.parallel.sequence_parallel();
    return megatron_flops(deck.model, double(deck.run.seq_len), sequences);
  }
  FlopsConvention f = FlopsConvention::model;
  if (!parse_name(formula, f)) throw std::runtime_error("unknown FLOP formula '" + formula + "'");
  return flops[f];
}

// |error| of a prediction against a printed value: 0 where the prediction rounds to it.
double rounded_error(double predicted, double value, double resolution) {
  const double nearest = std::clamp(predicted, value - resolution, value + resolution);
  return (predicted - nearest) / value;
}
}  // namespace

std::vector<ValidationTable> load_validation(const std::string& path) {
  TableReader r{path};
  const std::string text = read_input_file(path, "validation table", 16 << 20);  // never blocks
  if (const auto deep = yaml_nesting_problem(text); !deep.empty())
    throw std::runtime_error("validation table " + path + ": " + deep);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error("validation table " + path + ": not YAML: " + e.what());
  }
  const auto tables = root["tables"];
  if (!tables || !tables.IsSequence()) r.fail("tables", "expected a list");
  std::vector<ValidationTable> out;
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const auto& n = tables[i];
    const std::string key = "tables[" + std::to_string(i) + "]";
    ValidationTable t;
    t.id = r.text(n["id"], key + ".id");
    t.paper = r.text(n["paper"], key + ".paper");
    t.title = r.text(n["title"], key + ".title");
    t.source = r.text(n["source"], key + ".source");
    t.machine = r.text(n["machine"], key + ".machine");
    t.note = r.text(n["note"], key + ".note", false);
    t.max_error = r.number(n["max_error"], key + ".max_error", 0.15);
    t.max_mean_error = r.number(n["max_mean_error"], key + ".max_mean_error", 0.10);
    t.max_mfu_points = r.number(n["max_mfu_points"], key + ".max_mfu_points", 0.05);
    const auto rows = n["rows"];
    if (!rows || !rows.IsSequence()) r.fail(key + ".rows", "expected a list");
    for (std::size_t j = 0; j < rows.size(); ++j) t.rows.push_back(r.row(rows[j], t.id + ".rows[" + std::to_string(j) + "]"));
    out.push_back(std::move(t));
  }
  return out;
}

double predicted_figure(const PublishedFigure& f, const StepTime& t, const Deck& deck, const StepFlops& flops, int ranks) {
  const std::string& q = f.quantity;
  const auto after = [&](const char* prefix) { return q.substr(std::string(prefix).size()); };
  if (q == "step_s") return t.step_s;
  if (q.rfind("phase_s:", 0) == 0) {
    Phase p = Phase::step;
    if (!parse_name(after("phase_s:"), p)) throw std::runtime_error("unknown phase in '" + q + "'");
    return t.phases[p];
  }
  if (q == "tokens_per_s") return t.tokens_per_s;
  if (q == "tokens_per_s_per_gpu") return t.tokens_per_s / ranks;
  if (q.rfind("tflops_per_gpu:", 0) == 0) return flops_by(after("tflops_per_gpu:"), deck, flops, ranks) / t.step_s / ranks / 1e12;
  if (q.rfind("mfu:", 0) == 0) {
    const double peak = f.peak_tflops > 0 ? f.peak_tflops * 1e12 : t.mfu_peak_gflops * 1e9;
    return flops_by(after("mfu:"), deck, flops, ranks) / t.step_s / ranks / peak;
  }
  throw std::runtime_error("unknown quantity '" + q + "'");
}

std::vector<FigureResult> validate(const std::vector<ValidationTable>& tables, const std::string& path) {
  const auto dir = std::filesystem::path(path).parent_path();
  const auto at = [&](const std::string& p) { return (dir / p).lexically_normal().string(); };
  std::vector<FigureResult> out;
  for (const auto& t : tables) {
    for (const auto& row : t.rows) {
      std::string why = row.reason;
      StepTime time;
      Deck deck;
      DeckPlan plan;
      if (why.empty()) {
        try {
          deck = load_deck(at(row.deck), row.overrides);
          const MachineFile machine = load_machine_file(at(row.machine.empty() ? t.machine : row.machine), row.machine_overrides);
          plan = plan_deck(deck, deck.run.seq_len, {row.ranks, false, false}, why);
          if (why.empty()) time = price_plan(deck, plan, machine.rates);
        } catch (const std::exception& e) {
          why = e.what();
        }
      }
      for (const auto& f : row.figures) {
        FigureResult r{&t, &row, &f};
        r.reason = why;
        if (why.empty()) {
          try {
            r.predicted = predicted_figure(f, time, deck, plan.flops, row.ranks);
            r.expressed = true;
            r.error = rounded_error(r.predicted, f.value, f.resolution);
            if (f.kind == "mfu") r.error_points = r.predicted - f.value;
          } catch (const std::exception& e) {
            r.reason = e.what();
          }
        }
        out.push_back(r);
      }
    }
  }
  return out;
}

TableStats table_stats(const ValidationTable& table, const std::vector<FigureResult>& results) {
  TableStats s;
  int rel = 0, pts = 0;
  for (const auto& r : results) {
    if (r.table != &table) continue;
    ++s.figures;
    if (!r.expressed) continue;
    ++s.expressed;
    if (r.figure->kind == "mfu") {
      const double p = std::abs(r.error_points);
      s.mean_abs_points += p, ++pts;
      s.max_abs_points = std::max(s.max_abs_points, p);
      s.within = s.within && p <= table.max_mfu_points;
    } else {
      const double e = std::abs(r.error);
      s.mean_abs_error += e, ++rel;
      s.max_abs_error = std::max(s.max_abs_error, e);
      s.within = s.within && e <= table.max_error;
    }
  }
  if (rel) s.mean_abs_error /= rel;
  if (pts) s.mean_abs_points /= pts;
  s.within = s.within && s.mean_abs_error <= table.max_mean_error;
  return s;
}

}  // namespace minilst
