// The command line of `minilst`, parsed (CLI11) before MPI collectives, Kokkos or
// the deck: `run DECK [--set k=v]... [--machine FILE] [--kokkos-*=...]` (--machine: the last
// override, run.machine=FILE), `plan DECK [...]` (its device, reserve and
// budgets resolved and checked here), `plan --device list`, `keys`, `result METRICS.h5`, `--help`,
// `--version`, `verify DECK [--set k=v]... [--out FILE.h5] [--export FILE.h5]`,
// `probe --out FILE.yaml [...]`. Never throws: a bad command line is a message and exit 2.
#pragma once

#include <string>
#include <vector>

#include "app/plan_command.hpp"
#include "app/probe.hpp"
#include "app/validate_command.hpp"

namespace minilst {

struct Command {
  enum class Kind { run, plan, keys, result, verify, probe, validate, finished } kind = Kind::finished;
  int exit_code = 0;    // finished: 0 for --help and --version, 2 for a bad command line
  std::string out, err;  // finished: what rank 0 prints (help text; the error and its hint)
  std::string deck_path;                // run, plan: the deck; result: the metrics file
  std::vector<std::string> overrides;  // --set section.key=value (run --machine FILE: run.machine=FILE, last)
  std::string verify_out, verify_export;  // verify: --out (the table), --export (the reference step)
  bool keys_machine = false;  // keys --machine: the machine file's keys
  PlanArgs plan;
  ValidateArgs validate;  // validate: the table, the format
  ProbeArgs probe;  // probe: --out FILE.yaml and its sizes (app/probe.hpp)
};

Command parse_command_line(int argc, const char* const* argv);

}  // namespace minilst
