#include "app/validate_command.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "io/atomic_write.hpp"
#include "predict/validation.hpp"

namespace minilst {

namespace {
using Json = nlohmann::ordered_json;

Json number_or_null(double v) { return std::isfinite(v) ? Json(v) : Json(); }

Json row_json(const FigureResult& r) {
  Json j{{"paper", r.table->paper}, {"table", r.table->id}, {"row", r.row->label}, {"kind", r.figure->kind},
         {"quantity", r.figure->quantity}, {"unit", r.figure->unit}, {"published", r.figure->value},
         {"printed", r.figure->printed}};
  if (r.expressed) {
    j["predicted"] = number_or_null(r.predicted);
    j["error"] = number_or_null(r.error);
    if (r.figure->kind == "mfu") j["error_points"] = number_or_null(r.error_points);
  } else {
    j["reason"] = r.reason;
  }
  return j;
}

Json results_json(const std::vector<ValidationTable>& tables, const std::vector<FigureResult>& results) {
  Json rows = Json::array(), stats = Json::array();
  for (const auto& r : results) rows.push_back(row_json(r));
  for (const auto& t : tables) {
    const TableStats s = table_stats(t, results);
    stats.push_back({{"paper", t.paper}, {"table", t.id}, {"title", t.title}, {"figures", s.figures},
                     {"expressed", s.expressed}, {"mean_abs_error", s.mean_abs_error}, {"max_abs_error", s.max_abs_error},
                     {"limit", t.max_error}, {"mean_limit", t.max_mean_error}, {"mean_abs_mfu_points", s.mean_abs_points},
                     {"max_abs_mfu_points", s.max_abs_points}, {"mfu_limit_points", t.max_mfu_points},
                     {"within", s.within}});
  }
  return Json{{"rows", rows}, {"tables", stats}};
}

// validation/published.yaml here, else in the source tree of the build the program is in, else in
// an install's share/minilst; "" when none is there (the candidates in `looked`).
std::string default_table(std::string& looked) {
  namespace fs = std::filesystem;
  const std::string rel = "validation/published.yaml";
  std::vector<fs::path> candidates{fs::path(rel)};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      candidates.push_back(dir / rel);
      candidates.push_back(dir / "share/minilst" / rel);
    }
  }
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c, ec)) return c.lexically_normal().string();
    looked += (looked.empty() ? "" : ", ") + c.lexically_normal().string();
  }
  return "";
}

std::string shown(double v, const std::string& unit) {
  char b[64];
  if (unit == "fraction") std::snprintf(b, sizeof b, "%.2f%%", 100 * v);
  else std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

void print_table(const ValidationTable& t, const std::vector<FigureResult>& results) {
  std::printf("\n%s %s: %s\n  machine: %s%s%s\n", t.paper.c_str(), t.id.c_str(), t.title.c_str(), t.machine.c_str(),
              t.note.empty() ? "" : "\n  ", t.note.c_str());
  std::printf("  %-46s %-30s %14s %12s %9s\n", "row", "figure", "published", "predicted", "error");
  for (const auto& r : results) {
    if (r.table != &t) continue;
    const std::string figure = r.figure->quantity + " (" + r.figure->unit + ")";
    if (!r.expressed) {
      std::printf("  %-46.46s %-30.30s %14s %12s %9s  not expressible: %s\n", r.row->label.c_str(), figure.c_str(),
                  r.figure->printed.c_str(), "-", "-", r.reason.c_str());
      continue;
    }
    char err[32];
    if (r.figure->kind == "mfu") std::snprintf(err, sizeof err, "%+.1f pt", 100 * r.error_points);
    else std::snprintf(err, sizeof err, "%+.1f%%", 100 * r.error);
    std::printf("  %-46.46s %-30.30s %14s %12s %9s\n", r.row->label.c_str(), figure.c_str(), r.figure->printed.c_str(),
                shown(r.predicted, r.figure->unit).c_str(), err);
  }
  const TableStats s = table_stats(t, results);
  std::printf("  %d of %d figures predicted; times and throughputs: mean |error| %.1f%% (limit %.0f%%), largest %.1f%% "
              "(limit %.0f%%)", s.expressed, s.figures, 100 * s.mean_abs_error, 100 * t.max_mean_error,
              100 * s.max_abs_error, 100 * t.max_error);
  if (s.max_abs_points > 0 || s.mean_abs_points > 0)
    std::printf("; MFUs: mean |error| %.1f pt, largest %.1f pt (limit %.0f pt)", 100 * s.mean_abs_points,
                100 * s.max_abs_points, 100 * t.max_mfu_points);
  std::printf("%s\n", s.within ? "" : "  BEYOND ITS LIMIT");
}
}  // namespace

int run_validate(const ValidateArgs& args) {
  if (args.format != "text" && args.format != "json") {
    std::fprintf(stderr, "error: validate: --format must be text or json\n");
    return 2;
  }
  std::string path = args.path, looked;
  if (path.empty() && (path = default_table(looked)).empty()) {
    std::fprintf(stderr, "error: validate: no validation table given and none found (looked at %s)\n", looked.c_str());
    return 2;
  }
  std::vector<ValidationTable> tables;
  try {
    tables = load_validation(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: validate: %s\n", e.what());
    return 2;
  }
  if (!args.table.empty()) {
    std::vector<ValidationTable> one;
    for (auto& t : tables)
      if (t.id == args.table) one.push_back(std::move(t));
    if (one.empty()) {
      std::fprintf(stderr, "error: validate: --table %s: no such table in %s\n", args.table.c_str(), path.c_str());
      return 2;
    }
    tables = std::move(one);
  }
  const auto results = validate(tables, path);
  bool within = true;
  for (const auto& t : tables) within = within && table_stats(t, results).within;
  const Json json = results_json(tables, results);
  if (!args.out.empty()) {
    const std::string text = json.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
    try {
      write_file_atomically(args.out, text.data(), text.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: validate: --out %s: %s\n", args.out.c_str(), e.what());
      return 2;
    }
  }
  if (args.format == "json") {
    std::printf("%s\n", json.dump(1, ' ', false, Json::error_handler_t::replace).c_str());
    return within ? 0 : 1;
  }
  int expressed = 0;
  for (const auto& r : results) expressed += r.expressed;
  std::printf("validate: %zu tables, %zu published figures, %d predicted (the rest cannot be expressed yet: the reason "
              "beside each) from %s\n", tables.size(), results.size(), expressed, path.c_str());
  for (const auto& t : tables) print_table(t, results);
  std::printf("\n%s\n", within ? "every table within its limits" : "a table is beyond its limits");
  return within ? 0 : 1;
}

}  // namespace minilst
