#include "app/command_line.hpp"

#include "predict/device_facts.hpp"

#include <CLI/CLI.hpp>

#include <cctype>
#include <cmath>
#include <sstream>

#include "job/kokkos_flags.hpp"
#include "results/provenance.hpp"

namespace minilst {

namespace {
constexpr double kMaxBudgetMiB = double(1ULL << 40);  // a memory budget beyond 1 EiB is a typo

// A finite number of MiB in (0, 2^40], or [0, 2^40] with zero allowed (CLI11's
// PositiveNumber lets nan through).
CLI::Validator mib_validator(bool zero = false) {
  return CLI::Validator(
      [zero](std::string& text) -> std::string {
        double v = 0;
        std::size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (...) {
          used = 0;
        }
        if (used == text.size() && std::isfinite(v) && (v > 0 || (zero && v == 0)) && v <= kMaxBudgetMiB) return "";
        return zero ? "expected a number of MiB in [0, 2^40]" : "expected a number of MiB in (0, 2^40]";
      },
      "MIB");
}

// A finite number in (0, max] (CLI11's PositiveNumber lets nan through and names DBL_MAX).
CLI::Validator positive_validator(double max, const std::string& unit) {
  return CLI::Validator(
      [max, unit](std::string& text) -> std::string {
        double v = 0;
        std::size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (...) {
          used = 0;
        }
        if (used == text.size() && std::isfinite(v) && v > 0 && v <= max) return "";
        char limit[32];
        std::snprintf(limit, sizeof limit, "%g", max);
        return "expected a positive number of " + unit + ", at most " + limit;
      },
      unit);
}

// --device NAME: a preset (lower case taken as given in any case) or `list`.
CLI::Validator device_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        for (auto& ch : text) ch = char(std::tolower(static_cast<unsigned char>(ch)));
        if (text == "list" || find_device(text)) return "";
        std::string names;
        for (const auto& d : device_table()) names += std::string(names.empty() ? "" : ", ") + d.name;
        return "unknown device '" + text + "' (the presets: " + names + "; `minilst plan --device list`)";
      },
      "NAME");
}
}  // namespace

namespace {
CLI::App* add_plan(CLI::App& app, Command& c) {
  auto* plan = app.add_subcommand("plan", "predict every rank's memory, FLOPs and communication for a deck, without running it");
  plan->add_option("deck", c.deck_path, "YAML input deck (not needed with --device list)");
  plan->add_option("--set", c.overrides, "override a deck key: section.key=value (repeatable)");
  plan->add_option("--ranks", c.plan.ranks, "world size N (data parallel x ulysses x ring)")
      ->check(CLI::Range(1, 1 << 24));
  plan->add_option("--format", c.plan.format, "text or json")->check(CLI::IsMember({"text", "json"}));
  const auto mib = mib_validator();
  auto* device = plan->add_option("--device", c.plan.device,
                                  "a device preset: its memory as its driver reports it, less --reserve-mib, is the "
                                  "device budget per rank (`--device list`: the presets and their sources)")
                     ->transform(device_validator());
  auto* device_mib = plan->add_option("--device-mib", c.plan.device_mib,
                                      "the device's memory per rank, MiB (a device without a preset)")
                         ->check(mib);
  device->excludes(device_mib);
  plan->add_option("--reserve-mib", c.plan.reserve_mib,
                   "MiB of the device kept for the CUDA context, NCCL's buffers and the allocator (default 4096, or "
                   "a sixteenth of the device where that is less)")
      ->check(mib_validator(true));
  plan->add_option("--host-mib", c.plan.host_mib, "host memory budget per rank, MiB")->check(mib);
  plan->add_option("--activation-mib", c.plan.activation_mib,
                   "device budget per rank, MiB, for all but weights, gradients and optimizer moments")
      ->check(mib);
  plan->add_flag("--max-seq-len", c.plan.max_seq_len,
                 "print the longest run.seq_len whose planned run (its step arena included) fits the budgets; with "
                 "--machine: rank the layouts that fit at run.seq_len by predicted tokens/s");
  plan->add_option("--machine", c.plan.machine, "a machine file (machines/*.yaml, `minilst probe`): predict the step "
                   "time per phase on it (docs/time_model.md)");
  plan->add_option("--top", c.plan.top, "--max-seq-len --machine: the layouts printed")->check(CLI::Range(1, 1000));
  return plan;
}

CLI::App* add_probe(CLI::App& app, Command& c) {
  auto* probe = app.add_subcommand("probe", "measure this machine (GEMM, attention, bandwidths, links of the job's "
                                            "ranks) into a machine file for plan --machine (docs/time_model.md)");
  probe->add_option("--out", c.probe.out, "the machine file to write (YAML)")->required();
  probe->add_option("--name", c.probe.name, "the machine's name in the file (default: the host name)");
  probe->add_option("--size", c.probe.size, "GEMM size n (classes n^3, 8n x n x n, 8n x 2.69n x n, 4n x 16n x n), attention S = 4n")
      ->check(CLI::Range(16, 16384));
  probe->add_option("--repeats", c.probe.repeats, "timed windows per figure (the median is kept)")->check(CLI::Range(1, 1000));
  probe->add_option("--head-dim", c.probe.head_dim, "the head dim of the attention probe and the calibration step "
                    "(even, as a deck's; probe at the decks' own)")->check(CLI::Range(2, 256));
  probe->add_option("--comm-mib", c.probe.comm_mib, "the collectives' message per rank, MiB")->check(mib_validator());
  probe->add_option("--link-floor-gbs", c.probe.link_floor_gbs, "a link slower than this is implausible (default 0.1)")
      ->check(positive_validator(1e6, "GB/s"));
  probe->add_flag("--allow-implausible", c.probe.allow_implausible,
                  "write implausible figures (flagged under `implausible:`) instead of refusing");
  return probe;
}
}  // namespace

Command parse_command_line(int argc, const char* const* argv) {
  Command c;
  CLI::App app{"miniLST: the training step of a Llama-style decoder for long sequences, on Kokkos + MPI.\n"
               "Writes timing, memory and loss metrics to HDF5. See README.md."};
  app.set_version_flag("--version", version_string());
  app.require_subcommand(1);
  auto* run = app.add_subcommand("run", "run the training steps a deck describes (--kokkos-*=... flags go to Kokkos)");
  run->add_option("deck", c.deck_path, "YAML input deck (see inputs/)")->required();
  run->add_option("--set", c.overrides, "override a deck key: section.key=value (repeatable)");
  std::string run_machine;
  run->add_option("--machine", run_machine, "a machine file (machines/*.yaml, `minilst probe`): predict the step on "
                  "it and report the prediction beside the measured times (run.machine; docs/time_model.md)");
  run->allow_extras();
  auto* verify = app.add_subcommand("verify", "certify the deck's layout: its first step against the single-rank "
                                               "float64 reference, tensor by tensor (docs/verify.md)");
  verify->add_option("deck", c.deck_path, "YAML input deck (see inputs/)")->required();
  verify->add_option("--set", c.overrides, "override a deck key: section.key=value (repeatable)");
  verify->add_option("--out", c.verify_out, "the table's HDF5 file (default: beside output.metrics, <stem>.verify.h5)");
  verify->add_option("--export", c.verify_export, "write the reference step's tensors to this HDF5 file");
  verify->allow_extras();
  auto* keys = app.add_subcommand("keys", "list every deck key with its default and rule");
  keys->add_flag("--machine", c.keys_machine, "list the machine file's keys instead (docs/time_model.md)");
  auto* result = app.add_subcommand("result", "print the RESULT line of a metrics file (exit code as its run's)");
  result->add_option("metrics", c.deck_path, "a metrics file written by minilst run")->required();
  auto* plan = add_plan(app, c);
  auto* probe = add_probe(app, c);
  auto* validate = app.add_subcommand("validate", "predict every published GPU run of the seed papers and set the "
                                                  "published figures beside (docs/validation.md)");
  validate->add_option("table", c.validate.path,
                       "the validation table (default: validation/published.yaml here, else beside the program)");
  validate->add_option("--format", c.validate.format, "text or json")->check(CLI::IsMember({"text", "json"}));
  validate->add_option("--table", c.validate.table, "one table of it, by its id");
  validate->add_option("--out", c.validate.out, "also write the JSON to this new file (for analysis/plot_validation.py)");

  std::ostringstream out, err;
  try {
    app.parse(argc, argv);
    for (const auto& extra : (verify->parsed() ? verify : run)->remaining()) {
      if (extra.rfind("--kokkos-", 0) != 0) throw CLI::ExtrasError(verify->parsed() ? "verify" : "run", {extra});
      if (const auto problem = kokkos_flag_problem(extra); !problem.empty()) throw CLI::ValidationError(extra, problem);
    }
    if (run->parsed() && run->count("--machine")) c.overrides.push_back("run.machine=" + run_machine);  // wins
    if (plan->parsed()) {
      if (c.plan.device == "list") {  // the presets; no deck needed
        c.out = device_list(c.plan.format);
        return c;
      }
      if (c.deck_path.empty()) throw CLI::RequiredError("deck");
      if (const auto problem = resolve_budgets(c.plan); !problem.empty()) throw CLI::ValidationError(problem);
    }
  } catch (const CLI::ParseError& e) {
    c.exit_code = app.exit(e, out, err) == 0 ? 0 : 2;
    c.out = out.str();
    c.err = err.str();
    return c;
  }
  for (int i = 0; i < argc; ++i) c.probe.command_line += std::string(i ? " " : "") + argv[i];
  c.kind = keys->parsed()     ? Command::Kind::keys
           : result->parsed() ? Command::Kind::result
           : plan->parsed()   ? Command::Kind::plan
           : verify->parsed() ? Command::Kind::verify
           : probe->parsed()  ? Command::Kind::probe
           : validate->parsed() ? Command::Kind::validate
                              : Command::Kind::run;
  return c;
}

}  // namespace minilst
