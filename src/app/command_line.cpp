#include "app/command_line.hpp"

#include <CLI/CLI.hpp>

#include <cmath>
#include <sstream>

#include "job/kokkos_flags.hpp"
#include "results/provenance.hpp"

namespace minilst {

namespace {
constexpr double kMaxBudgetMiB = double(1ULL << 40);  // a memory budget beyond 1 EiB is a typo

// A finite number of MiB in (0, 2^40] (CLI11's PositiveNumber lets nan through).
CLI::Validator mib_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        std::size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (...) {
          used = 0;
        }
        return used == text.size() && std::isfinite(v) && v > 0 && v <= kMaxBudgetMiB ? ""
                                                                                       : "expected a number of MiB in (0, 2^40]";
      },
      "MIB");
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
  run->allow_extras();
  auto* keys = app.add_subcommand("keys", "list every deck key with its default and rule");
  auto* result = app.add_subcommand("result", "print the RESULT line of a metrics file (exit code as its run's)");
  result->add_option("metrics", c.deck_path, "a metrics file written by minilst run")->required();
  auto* plan = app.add_subcommand("plan", "predict every rank's memory, FLOPs and communication for a deck, without running it");
  plan->add_option("deck", c.deck_path, "YAML input deck")->required();
  plan->add_option("--set", c.overrides, "override a deck key: section.key=value (repeatable)");
  plan->add_option("--ranks", c.plan.ranks, "world size N (data parallel x ulysses x ring)")
      ->check(CLI::Range(1, 1 << 24));
  plan->add_option("--format", c.plan.format, "text or json")->check(CLI::IsMember({"text", "json"}));
  const auto mib = mib_validator();
  plan->add_option("--device-mib", c.plan.device_mib, "device memory budget per rank, MiB")->check(mib);
  plan->add_option("--host-mib", c.plan.host_mib, "host memory budget per rank, MiB")->check(mib);
  plan->add_option("--activation-mib", c.plan.activation_mib,
                   "device budget per rank, MiB, for all but weights, gradients and optimizer moments")
      ->check(mib);
  plan->add_flag("--max-seq-len", c.plan.max_seq_len, "print the longest run.seq_len that fits the budgets");

  std::ostringstream out, err;
  try {
    app.parse(argc, argv);
    for (const auto& extra : run->remaining()) {
      if (extra.rfind("--kokkos-", 0) != 0) throw CLI::ExtrasError("run", {extra});
      if (const auto problem = kokkos_flag_problem(extra); !problem.empty()) throw CLI::ValidationError(extra, problem);
    }
  } catch (const CLI::ParseError& e) {
    c.exit_code = app.exit(e, out, err) == 0 ? 0 : 2;
    c.out = out.str();
    c.err = err.str();
    return c;
  }
  c.kind = keys->parsed()     ? Command::Kind::keys
           : result->parsed() ? Command::Kind::result
           : plan->parsed()   ? Command::Kind::plan
                              : Command::Kind::run;
  return c;
}

}  // namespace minilst
