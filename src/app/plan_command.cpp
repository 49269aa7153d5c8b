#include "app/plan_command.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/range.hpp"
#include "predict/comm_model.hpp"
#include "predict/device_facts.hpp"
#include "predict/layout_search.hpp"
#include "predict/machine_file.hpp"
#include "predict/prediction.hpp"

namespace minilst {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;

std::string layout_of(const Deck& deck, const DeckPlan& p) {
  const auto& par = deck.parallel;
  std::string s = std::to_string(p.ranks) + " rank(s) = " + std::to_string(p.data_parallel) + " data-parallel x " +
                  std::to_string(par.ulysses) + " ulysses x " + std::to_string(par.ring) + " ring";
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

std::string time_json(const StepTime& t, const MachineFile& m) {
  std::string s = ", \"machine\": {\"name\": \"" + m.rates.name + "\", \"kind\": \"" + m.kind + "\"}";
  char b[128];
  std::snprintf(b, sizeof b, ", \"predicted_step_s\": %.6e, \"predicted_phases\": {", t.step_s);
  s += b;
  std::vector<std::pair<std::string, double>> phases;
  for (const Phase ph : all_of<Phase>())
    if (priced_phase(ph)) phases.push_back({name_of(ph), t.phases[ph]});
  std::sort(phases.begin(), phases.end());
  const char* sep = "";
  for (const auto& [k, v] : phases) {
    std::snprintf(b, sizeof b, "%s\"%s\": %.6e", sep, k.c_str(), v);
    s += b;
    sep = ", ";
  }
  std::snprintf(b, sizeof b, "}, \"predicted_tokens_per_s\": %.6e, \"predicted_mfu\": %.6g", t.tokens_per_s,
                t.mfu[FlopsConvention::model]);
  s += b;
  s += ", \"predicted_mfu_conventions\": {";  // flops.hpp: each over the machine file's MFU peak
  for (const FlopsConvention f : all_of<FlopsConvention>()) {
    std::snprintf(b, sizeof b, "%s\"%s\": %.6g", f == FlopsConvention::model ? "" : ", ", name_of(f).c_str(), t.mfu[f]);
    s += b;
  }
  return s + "}";
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

// extra_json: more keys for the JSON object (", \"k\": v..."); note: why this plan (the longest ...).
void print_json(const Deck& deck, const DeckPlan& p, const PlanArgs& a, const char* note, const std::string& extra_json) {
  const DeviceFacts* preset = a.device.empty() ? nullptr : find_device(a.device);
  std::printf("{\"seq_len\": %lld, \"ranks\": %d, \"data_parallel\": %d, \"ulysses\": %d, \"ring\": %d, "
              "\"zero_stage\": %d, \"optimizer_offload\": %s, "
              "\"policy\": \"%s\", \"offload_alpha\": %.6g, \"precision\": \"%s\", \"local_tokens\": %lld, "
              "\"mlp_chunks\": %d, \"lm_head_chunks\": %d, \"flops_per_step\": %.6e, \"arena_bytes\": %llu, "
              "\"arena_lower_bound_bytes\": %llu, \"device_planned_bytes\": %llu, \"device_outside_arena_bytes\": %llu",
              static_cast<long long>(p.seq_len), p.ranks, p.data_parallel, deck.parallel.ulysses, deck.parallel.ring,
              deck.parallel.zero, deck.memory.optimizer_offload ? "true" : "false", name_of(p.options.policy).c_str(),
              p.options.offload.alpha, name_of(deck.run.precision).c_str(), static_cast<long long>(p.local_tokens),
              effective_chunks(p.local_tokens, p.options.mlp_chunks), effective_chunks(p.local_tokens, p.options.lm_head_chunks),
              p.flops_per_step, static_cast<unsigned long long>(p.arena_bytes),
              static_cast<unsigned long long>(p.arena_lower_bound), static_cast<unsigned long long>(p.device_planned),
              static_cast<unsigned long long>(p.device_outside_arena));
  if (a.device_mib > 0)
    std::printf(", \"device\": {\"name\": \"%s\", \"label\": \"%s\", \"capacity_mib\": %.10g}, \"reserve_mib\": %.10g, "
                "\"device_budget_mib\": %.10g",
                preset ? preset->name : "custom", preset ? preset->label : "--device-mib", a.device_mib,
                std::max(0.0, a.reserve_mib), a.device_budget_mib());
  else
    std::printf(", \"device\": null, \"reserve_mib\": 0, \"device_budget_mib\": 0");
  std::printf(", \"host_budget_mib\": %.10g, \"activation_budget_mib\": %.10g", a.host_mib, a.activation_mib);
  if (a.any()) std::printf(", \"fits\": %s", p.fits(a) ? "true" : "false");
  for (const auto* m : {&p.memory, &p.memory_min}) {
    std::printf(", \"%s\": {", m == &p.memory ? "memory_bytes" : "memory_bytes_min");
    const char* sep = "";
    for (const auto& [k, v] : *m) std::printf("%s\"%s\": %llu", sep, k.c_str(), static_cast<unsigned long long>(v)), sep = ", ";
    std::printf("}");
  }
  std::printf(", \"flops_per_step_conventions\": {\"model\": %.6e, \"hardware\": %.6e, \"square\": %.6e}",
              p.flops[FlopsConvention::model], p.flops[FlopsConvention::hardware], p.flops[FlopsConvention::square]);
  std::printf(", \"comm_bytes\": {");
  const char* sep = "";
  for (const auto& [k, v] : comm_by_name(deck, p.comm))
    std::printf("%s\"%s\": %llu", sep, k.c_str(), static_cast<unsigned long long>(v)), sep = ", ";
  std::printf("}%s%s}\n", extra_json.c_str(), note[0] ? (std::string(", \"note\": \"") + note + "\"").c_str() : "");
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
  std::printf("  per rank: up to %lld tokens; mini-sequences: mlp %d, lm_head %d\n", static_cast<long long>(p.local_tokens),
              effective_chunks(p.local_tokens, p.options.mlp_chunks), effective_chunks(p.local_tokens, p.options.lm_head_chunks));
  print_memory_text(p, a);
  std::printf("  communication per step, MiB sent per rank (max):");
  for (const auto& [k, v] : comm_by_name(deck, p.comm)) std::printf("  %s %.2f", k.c_str(), double(v) / kMiB);
  std::printf("\n  model FLOPs per step: %.4e (%.4e per rank); hardware (recompute counted) %.4e, square attention %.4e\n",
              p.flops_per_step, p.flops_per_step / p.ranks, p.flops[FlopsConvention::hardware],
              p.flops[FlopsConvention::square]);
  std::printf("%s", extra_text.c_str());
}

void print(const Deck& deck, const DeckPlan& p, const PlanArgs& a, const char* note, const std::string& extra_json = "",
           const std::string& extra_text = "") {
  if (a.format == "json") print_json(deck, p, a, note, extra_json);
  else print_text(deck, p, a, note, extra_text);
}

void print_search_json(const LayoutSearch& s, const PlanArgs& a, const MachineFile& machine, std::int64_t S) {
  std::printf("{\"seq_len\": %lld, \"ranks\": %d, \"machine\": {\"name\": \"%s\", \"kind\": \"%s\"}, \"tried\": %d, "
              "\"refused\": %d, \"over_budget\": %d, \"fit\": %zu, \"layouts\": [",
              static_cast<long long>(S), a.ranks, machine.rates.name.c_str(), machine.kind.c_str(), s.tried, s.refused,
              s.over, s.fit);
  const char* sep = "";
  for (const auto& c : s.best) {
    const auto& p = c.deck.parallel;
    std::printf("%s{\"layout\": \"%s\", \"data_parallel\": %d, \"ulysses\": %d, \"ring\": %d, \"zero_stage\": %d, "
                "\"offload_alpha\": %.6g, \"mlp_chunks\": %d, \"lm_head_chunks\": %d, \"device_planned_bytes\": %llu%s}",
                sep, c.name().c_str(), c.plan.data_parallel, p.ulysses, p.ring, p.zero, c.plan.options.offload.alpha,
                effective_chunks(c.plan.local_tokens, c.plan.options.mlp_chunks),
                effective_chunks(c.plan.local_tokens, c.plan.options.lm_head_chunks),
                static_cast<unsigned long long>(c.plan.device_planned), time_json(c.time, machine).c_str());
    sep = ", ";
  }
  std::printf("]}\n");
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
  int i = 0;
  for (const auto& c : s.best)
    std::printf("  %-4d %-30s %12lld %12.0f %10.4g %12.4g %12.4g %7.3f\n", ++i, c.name().c_str(), static_cast<long long>(S),
                double(c.plan.device_planned) / kMiB, c.time.step_s, c.time.tokens_per_s, c.time.tokens_per_s / a.ranks,
                c.time.mfu[FlopsConvention::model]);
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
  print(deck, r.plan, a, "the longest run.seq_len within the budget");
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
  print(deck, p, a, "", time_json(t, *machine), time_text(t, *machine, p.ranks));
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
