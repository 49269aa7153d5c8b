#include "app/plan_command.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <cmath>

#include "core/range.hpp"
#include "core/units.hpp"
#include "predict/comm_model.hpp"
#include "predict/device_facts.hpp"
#include "predict/layout_search.hpp"
#include "predict/machine_file.hpp"
#include "predict/prediction.hpp"
#include "app/run_prediction.hpp"
#include "results/provenance.hpp"

namespace minilst {

namespace {
using Json = nlohmann::ordered_json;

std::string layout_of(const Deck& deck, const DeckPlan& p) {
  const auto& par = deck.parallel;
  std::string s = std::to_string(p.ranks) + " rank(s) = " + std::to_string(p.data_parallel) + " data-parallel x " +
                  (par.tensor > 1 ? std::to_string(par.tensor) + " tensor x " : "") + std::to_string(par.ulysses) +
                  " ulysses x " + std::to_string(par.ring) + " ring";
  if (par.ring > 1) s += " (" + name_of(par.layout) + ", " + name_of(par.variant) + ")";
  if (par.zero > 0) s += ", ZeRO stage " + std::to_string(par.zero);
  if (deck.memory.optimizer_offload) s += ", optimizer offload";
  return s;
}

// The operations the deck's layout sends anything under, by name (as the JSON and text list them).
std::vector<std::pair<std::string, std::uint64_t>> comm_by_name(const Deck& deck, const CommBytes& comm) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (const CommOp op : all_of<CommOp>())
    if (comm_op_used(op, deck.parallel, deck.parallel.zero)) out.push_back({name_of(op), comm[op]});
  std::sort(out.begin(), out.end());
  return out;
}

// JSON through the library (names escaped); a number that is not finite is null, with the reason
// under "non_finite".
Json finite_or_null(double v, const std::string& key, Json& reasons) {
  if (std::isfinite(v)) return v;
  reasons[key] = std::isnan(v) ? "not a number" : "infinite";
  return nullptr;
}

// path: the machine file's (named with its digest, FNV-1a of its bytes, for a report's provenance).
Json time_json(const StepTime& t, const MachineFile& m, const std::string& path) {
  Json j, reasons = Json::object();
  j["machine"] = {{"name", m.rates.name}, {"kind", m.kind}, {"file", path}, {"digest", file_digest(path)}};
  j["mfu_peak_gflops"] = finite_or_null(t.mfu_peak_gflops, "mfu_peak_gflops", reasons);
  j["predicted_step_s"] = finite_or_null(t.step_s, "predicted_step_s", reasons);
  std::vector<std::pair<std::string, double>> phases;
  for (const Phase ph : all_of<Phase>())
    if (priced_phase(ph)) phases.push_back({name_of(ph), t.phases[ph]});
  std::sort(phases.begin(), phases.end());
  Json ph = Json::object();
  for (const auto& [k, v] : phases) ph[k] = finite_or_null(v, "predicted_phases." + k, reasons);
  j["predicted_phases"] = ph;
  j["predicted_tokens_per_s"] = finite_or_null(t.tokens_per_s, "predicted_tokens_per_s", reasons);
  j["predicted_mfu"] = finite_or_null(t.mfu[FlopsConvention::model], "predicted_mfu", reasons);
  Json mfu = Json::object();  // flops.hpp: each over the machine file's MFU peak
  for (const FlopsConvention f : all_of<FlopsConvention>())
    mfu[name_of(f)] = finite_or_null(t.mfu[f], "predicted_mfu_conventions." + name_of(f), reasons);
  j["predicted_mfu_conventions"] = mfu;
  if (!reasons.empty()) j["non_finite"] = reasons;
  return j;
}

std::string time_text(const StepTime& t, const MachineFile& m, int ranks) {
  char b[256];
  std::snprintf(b, sizeof b,
                "  predicted on %s (%s machine file): step %.4g s, %.4g tokens/s (%.4g per rank), MFU %.3f (model FLOPs; "
                "hardware %.3f, square attention %.3f; over %.4g GFLOP/s per rank)\n",
                m.rates.name.c_str(), m.kind.c_str(), t.step_s, t.tokens_per_s, t.tokens_per_s / ranks,
                t.mfu[FlopsConvention::model], t.mfu[FlopsConvention::hardware], t.mfu[FlopsConvention::square],
                t.mfu_peak_gflops);
  std::string s = b;
  s += "    phase (s per step):";
  for (const Phase ph : all_of<Phase>()) {  // the priced parts of the step, in the table's order
    if (ph == Phase::step || ph == Phase::copy_engine_busy || !priced_phase(ph) || t.phases[ph] <= 0) continue;
    std::snprintf(b, sizeof b, "  %s %.4g", name_of(ph).c_str(), t.phases[ph]);
    s += b;
  }
  return s + "\n";
}

// extra: more keys for the JSON object; note: why this plan (the longest ...).
void print_json(const Deck& deck, const DeckPlan& p, const PlanArgs& a, const char* note, const Json& extra) {
  const DeviceFacts* preset = a.device.empty() ? nullptr : find_device(a.device);
  Json j;
  j["deck"] = deck.path, j["deck_digest"] = deck.problem_digest;  // what a report pairs plans and runs by
  j["minilst_version"] = version_string(), j["created_utc"] = utc_time(false);
  j["seq_len"] = p.seq_len, j["ranks"] = p.ranks, j["data_parallel"] = p.data_parallel;
  j["tensor"] = deck.parallel.tensor, j["ulysses"] = deck.parallel.ulysses, j["ring"] = deck.parallel.ring;
  j["zero_stage"] = deck.parallel.zero;
  j["ulysses_head_chunks"] = head_chunks(deck.model, deck.parallel);
  j["optimizer_offload"] = deck.memory.optimizer_offload, j["policy"] = name_of(p.options.policy);
  j["offload_alpha"] = p.options.offload.alpha, j["precision"] = name_of(deck.run.precision);
  j["local_tokens"] = p.local_tokens;
  j["mlp_chunks"] = effective_chunks(p.local_tokens, p.options.mlp_chunks);
  j["lm_head_chunks"] = effective_chunks(p.local_tokens, p.options.lm_head_chunks);
  j["flops_per_step"] = p.flops_per_step, j["arena_bytes"] = p.arena_bytes;
  j["arena_lower_bound_bytes"] = p.arena_lower_bound, j["device_planned_bytes"] = p.device_planned;
  j["device_outside_arena_bytes"] = p.device_outside_arena;
  if (a.device_mib > 0)
    j["device"] = {{"name", preset ? preset->name : "custom"}, {"label", preset ? preset->label : "--device-mib"},
                   {"capacity_mib", a.device_mib}};
  else
    j["device"] = nullptr;
  j["reserve_mib"] = a.device_mib > 0 ? std::max(0.0, a.reserve_mib) : 0.0;
  j["device_budget_mib"] = a.device_mib > 0 ? a.device_budget_mib() : 0.0;
  j["host_budget_mib"] = a.host_mib, j["activation_budget_mib"] = a.activation_mib;
  if (a.any()) j["fits"] = p.fits(a);
  j["memory_bytes"] = p.memory, j["memory_bytes_min"] = p.memory_min;
  j["flops_per_step_conventions"] = {{"model", p.flops[FlopsConvention::model]},
                                     {"hardware", p.flops[FlopsConvention::hardware]},
                                     {"square", p.flops[FlopsConvention::square]}};
  Json comm = Json::object();
  for (const auto& [k, v] : comm_by_name(deck, p.comm)) comm[k] = v;
  j["comm_bytes"] = comm;
  for (const auto& [k, v] : extra.items()) j[k] = v;
  if (note[0]) j["note"] = note;
  std::printf("%s\n", j.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
}

// The memory lines of the text: per category, the arena, the budgets.
void print_memory_text(const DeckPlan& p, const PlanArgs& a) {
  std::printf("  memory per rank, MiB         max        min\n");
  for (const auto& [k, v] : p.memory)
    std::printf("    %-14s %12.2f %10.2f\n", k.c_str(), double(v) / kMiB, double(p.memory_min.at(k)) / kMiB);
  if (p.arena_bytes) {
    std::printf("  step arena (memory.planner plan): %.2f MiB = %.3f x lower bound %.2f MiB (%s)\n",
                double(p.arena_bytes) / kMiB, double(p.arena_bytes) / double(std::max<std::uint64_t>(1, p.arena_lower_bound)),
                double(p.arena_lower_bound) / kMiB, p.arena_method.c_str());
    std::printf("  device memory a planned run holds per rank: %.2f MiB = %.2f MiB outside the step + the arena\n",
                double(p.device_planned) / kMiB, double(p.device_outside_arena) / kMiB);
  }
  if (!a.any()) return;
  std::printf("  within the budget: %s", p.fits(a) ? "yes" : "no");
  if (a.device_mib > 0) std::printf(" (device %.2f of %.2f MiB)", double(p.device_planned) / kMiB, a.device_budget_mib());
  if (a.host_mib > 0) std::printf(" (host %.2f of %.2f MiB)", p.host_bytes() / kMiB, a.host_mib);
  if (a.activation_mib > 0) std::printf(" (activations %.2f of %.2f MiB)", p.activation_bytes() / kMiB, a.activation_mib);
  std::printf("\n");
}

void print_text(const Deck& deck, const DeckPlan& p, const PlanArgs& a, const char* note, const std::string& extra_text) {
  const std::string policy = name_of(p.options.policy);
  std::printf("plan: %s, S = %lld tokens, %s, %s, memory.policy %s", deck.path.c_str(), static_cast<long long>(p.seq_len),
              layout_of(deck, p).c_str(), name_of(deck.run.precision).c_str(), policy.c_str());
  if (p.options.policy == MemoryPolicy::offload) std::printf(" (alpha %.4g)", p.options.offload.alpha);
  std::printf("%s%s\n", note[0] ? ": " : "", note);
  if (a.device_mib > 0) std::printf("  device: %s\n", device_text(a).c_str());
  if (a.host_mib > 0)
    std::printf("  host: %.10g MiB per rank%s\n", a.host_mib, a.host_from_device ? " (the device's host memory)" : "");
  if (a.activation_mib > 0) std::printf("  activation budget: %.10g MiB per rank\n", a.activation_mib);
  std::printf("  per rank: up to %lld tokens; mini-sequences: mlp %d, lm_head %d", static_cast<long long>(p.local_tokens),
              effective_chunks(p.local_tokens, p.options.mlp_chunks), effective_chunks(p.local_tokens, p.options.lm_head_chunks));
  if (const int n = head_chunks(deck.model, deck.parallel); n > 1) std::printf("; ulysses head chunks %d", n);
  std::printf("\n");
  print_memory_text(p, a);
  std::printf("  communication per step, MiB sent per rank (max):");
  for (const auto& [k, v] : comm_by_name(deck, p.comm)) std::printf("  %s %.2f", k.c_str(), double(v) / kMiB);
  std::printf("\n  model FLOPs per step: %.4e (%.4e per rank); hardware (recompute counted) %.4e, square attention %.4e\n",
              p.flops_per_step, p.flops_per_step / p.ranks, p.flops[FlopsConvention::hardware],
              p.flops[FlopsConvention::square]);
  std::printf("%s", extra_text.c_str());
}

void print(const Deck& deck, const DeckPlan& p, const PlanArgs& a, const char* note, const Json& extra = Json::object(),
           const std::string& extra_text = "") {
  if (a.format == "json") print_json(deck, p, a, note, extra);
  else print_text(deck, p, a, note, extra_text);
}

void print_search_json(const LayoutSearch& s, const PlanArgs& a, const MachineFile& machine, std::int64_t S) {
  Json j;
  j["seq_len"] = S, j["ranks"] = a.ranks, j["machine"] = {{"name", machine.rates.name}, {"kind", machine.kind}};
  j["tried"] = s.tried, j["refused"] = s.refused, j["over_budget"] = s.over, j["fit"] = s.fit;
  const auto layouts_of = [&](const std::vector<LayoutCandidate>& list) {
  Json layouts = Json::array();
  for (const auto& c : list) {
    const auto& p = c.deck.parallel;
    Json l = {{"layout", c.name()}, {"data_parallel", c.plan.data_parallel}, {"tensor", p.tensor}, {"ulysses", p.ulysses},
              {"ulysses_head_chunks", head_chunks(c.deck.model, p)}, {"ring", p.ring},
              {"zero_stage", p.zero}, {"offload_alpha", c.plan.options.offload.alpha},
              {"mlp_chunks", effective_chunks(c.plan.local_tokens, c.plan.options.mlp_chunks)},
              {"lm_head_chunks", effective_chunks(c.plan.local_tokens, c.plan.options.lm_head_chunks)},
              {"device_planned_bytes", c.plan.device_planned}};
    const Json time = time_json(c.time, machine, a.machine);  // named: items() refers to it
    for (const auto& [k, v] : time.items()) l[k] = v;
    layouts.push_back(l);
  }
  return layouts;
  };
  j["layouts"] = layouts_of(s.best);
  j["best_by_tensor"] = layouts_of(s.best_by_tensor);  // the best of each tensor-parallel degree not ranked above
  std::printf("%s\n", j.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
}

void print_search_text(const Deck& deck, const LayoutSearch& s, const PlanArgs& a, const MachineFile& machine) {
  const std::int64_t S = deck.run.seq_len;
  std::printf("plan: %s on %d ranks of %s (%s machine file), S = %lld tokens, %s, memory.policy %s: %zu of %d layouts fit "
              "(%d refused by a layout rule, %d over the budget); the best %zu by predicted tokens/s:\n",
              deck.path.c_str(), a.ranks, machine.rates.name.c_str(), machine.kind.c_str(), static_cast<long long>(S),
              name_of(deck.run.precision).c_str(), name_of(deck.options.policy).c_str(), s.fit, s.tried, s.refused, s.over,
              s.best.size());
  if (a.device_mib > 0) std::printf("  device: %s\n", device_text(a).c_str());
  std::printf("  %-4s %-30s %12s %12s %10s %12s %12s %7s\n", "rank", "layout", "seq_len", "device MiB", "step s", "tokens/s",
              "tok/s/rank", "MFU");  // the model-FLOPs convention (flops.hpp)
  const auto row = [&](const std::string& rank, const LayoutCandidate& c) {
    std::printf("  %-4s %-30s %12lld %12.0f %10.4g %12.4g %12.4g %7.3f\n", rank.c_str(), c.name().c_str(),
                static_cast<long long>(S), double(c.plan.device_planned) / kMiB, c.time.step_s, c.time.tokens_per_s,
                c.time.tokens_per_s / a.ranks, c.time.mfu[FlopsConvention::model]);
  };
  int i = 0;
  for (const auto& c : s.best) row(std::to_string(++i), c);
  if (!s.best_by_tensor.empty()) std::printf("  the best of each tensor-parallel degree not ranked above:\n");
  for (const auto& c : s.best_by_tensor) row("-", c);
  if (!s.best.empty()) std::printf("%s", time_text(s.best.front().time, machine, a.ranks).c_str());
}

int run_layout_search(const Deck& deck, const PlanArgs& a, const MachineFile& machine) {
  const LayoutSearch s = search_layouts(deck, a.ranks, a, machine.rates, a.top, a.arena);
  if (s.fit == 0) {
    std::fprintf(stderr, "error: plan: no layout of %d ranks fits the budget at run.seq_len = %lld (%d tried: %d refused "
                 "by a layout rule, %d over the budget)%s%s\n",
                 a.ranks, static_cast<long long>(deck.run.seq_len), s.tried, s.refused, s.over,
                 s.missing.empty() ? "" : "; ", s.missing.c_str());
    return 2;
  }
  if (a.format == "json") print_search_json(s, a, machine, deck.run.seq_len);
  else print_search_text(deck, s, a, machine);
  return 0;
}

// --max-seq-len without a machine: the longest run.seq_len within the budgets.
int run_longest(const Deck& deck, const PlanArgs& a) {
  std::string error;
  const LongestRun r = longest_run(deck, a.ranks, a, a.arena, error);
  if (!error.empty()) {
    std::fprintf(stderr, "error: plan: %s\n", error.c_str());
    return 2;
  }
  if (!r.fits) {
    std::string budget;
    if (a.device_mib > 0) budget += "; device: " + device_text(a);
    if (a.host_mib > 0) budget += "; host: " + std::to_string(std::uint64_t(a.host_mib)) + " MiB per rank";
    if (a.activation_mib > 0) budget += "; activations: " + std::to_string(std::uint64_t(a.activation_mib)) + " MiB per rank";
    std::fprintf(stderr, "error: plan: not even S = %lld fits: a planned run needs %.2f MiB of device memory per rank "
                 "(%.2f MiB of it weights, gradients and optimizer moments)%s%s\n",
                 static_cast<long long>(r.lowest), double(r.plan.device_planned) / kMiB, r.plan.state_bytes() / kMiB,
                 a.host_mib > 0 ? (" and " + std::to_string(std::uint64_t(r.plan.host_bytes()) / (1 << 20)) +
                                   " MiB of host memory").c_str() : "",
                 budget.c_str());
    return 2;
  }
  Deck chosen = deck;  // ulysses_head_chunks auto: the count the search chose
  if (r.head_chunks > 0) chosen.parallel.ulysses_head_chunks = r.head_chunks;
  print(chosen, r.plan, a, r.head_chunks > 0 ? "the longest run.seq_len within the budget (ulysses head chunks auto: "
                                               "the longest of every valid count)"
                                             : "the longest run.seq_len within the budget");
  if (a.device_mib <= 0)  // a length bounded by the host or activations alone: say what the device then needs
    std::fprintf(stderr, "note: plan: no device budget (--device NAME or --device-mib MIB): the device's memory was "
                 "not bounded; this length needs %.2f MiB of device memory per rank\n",
                 double(r.plan.device_planned) / kMiB);
  if (r.hit_limit) std::fprintf(stderr, "note: plan: run.seq_len's own limit (2^40) came before the budget\n");
  else if (!r.bound.empty()) std::fprintf(stderr, "note: plan: the search met a rule as well as the budget: %s\n", r.bound.c_str());
  if (!deck.memory.plan && a.device_mib > 0)
    std::fprintf(stderr, "note: plan: memory.planner none: every buffer its own allocation; the allocator's "
                 "fragmentation is not counted (memory.planner plan counts its arena)\n");
  return 0;
}

// The plan at run.seq_len, and with a machine file its predicted time.
int run_one(const Deck& deck, const PlanArgs& a, const MachineFile* machine) {
  std::string error;
  const DeckPlan p = plan_deck(deck, deck.run.seq_len, {a.ranks, a.arena, false}, error);
  if (!error.empty()) {
    std::fprintf(stderr, "error: plan: %s\n", error.c_str());
    return 2;
  }
  if (!machine) {
    print(deck, p, a, "");
    return 0;
  }
  StepTime t;
  try {
    t = price_plan(deck, p, machine->rates);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: plan: --machine %s: %s\n", a.machine.c_str(), e.what());
    return 2;
  }
  print(deck, p, a, "", time_json(t, *machine, a.machine), time_text(t, *machine, p.ranks));
  return 0;
}
}  // namespace

int run_plan(const Deck& deck, const PlanArgs& args) {
  if (args.format != "text" && args.format != "json") {
    std::fprintf(stderr, "error: plan: --format must be text or json\n");
    return 2;
  }
  PlanArgs a = args;
  if (const auto problem = resolve_budgets(a); !problem.empty()) {
    std::fprintf(stderr, "error: plan: %s\n", problem.c_str());
    return 2;
  }
  MachineFile machine;
  if (!a.machine.empty()) {
    try {
      machine = load_machine_file(a.machine);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: plan: --machine: %s\n", e.what());
      return 2;
    }
    for (const auto& b : machine.implausible)
      std::fprintf(stderr, "warning: plan: %s flags an implausible figure: %s\n", a.machine.c_str(), b.c_str());
  }
  if (!a.max_seq_len) return run_one(deck, a, a.machine.empty() ? nullptr : &machine);
  if (!a.any()) {
    std::fprintf(stderr, "error: plan: --max-seq-len needs a budget: --device NAME or --device-mib MIB (and/or "
                 "--host-mib MIB, --activation-mib MIB)\n");
    return 2;
  }
  return a.machine.empty() ? run_longest(deck, a) : run_layout_search(deck, a, machine);
}

}  // namespace minilst
