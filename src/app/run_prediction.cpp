#include "app/run_prediction.hpp"

#include "io/input_file.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "app/probe.hpp"
#include "predict/machine_file.hpp"
#include "core/fnv1a.hpp"

namespace minilst {

namespace {
std::string text_digest(const std::string& text) {
  Fnv1a digest;
  digest.add(text);
  return digest.hex();
}
}  // namespace

std::string file_digest(const std::string& path) {
  return text_digest(read_input_file(path, "machine file", 1 << 20));  // io/input_file.hpp: never blocks
}

namespace {
// run.machine: probe: this job's ranks measured as `minilst probe` measures them, at the deck's head dim.
MachineFile probe_at_start(const Deck& deck, MPI_Comm comm) {
  ProbeArgs a;
  a.head_dim = std::clamp(int(deck.model.head_dim()), 2, 256);  // a deck's is even (RoPE)
  a.command_line = "minilst run (run.machine: probe, --head-dim " + std::to_string(a.head_dim) + ")";
  std::vector<std::string> slow;
  MachineFile m = measure_machine(a, comm, false, slow);
  m.implausible = implausible_figures(m, {}, m.link_floor_gbs);
  return m;
}
}  // namespace

std::string price_run(const Deck& deck, MPI_Comm comm, Prediction& prediction, std::vector<std::string>& warnings) {
  const std::string& path = deck.run.machine;
  try {
    const bool probe = path == kMachineProbeAtStart;
    const MachineFile machine = probe ? probe_at_start(deck, comm) : load_machine_file(path);  // throws naming the key
    if (probe && !machine.implausible.empty()) {  // a figure outside its bounds would mislead: the run goes on unpriced
      warnings = machine.implausible;
      warnings.push_back("so this run is not priced (no prediction recorded); probe an idle machine with minilst probe");
      return "";
    }
    PredictedTime& out = prediction.time;
    try {
      out.time = price_plan(deck, prediction.plan, machine.rates);
    } catch (const std::exception& e) {
      return "run.machine: machine file " + path + ": cannot price this deck on " + std::to_string(prediction.plan.ranks) +
             " rank(s): " + e.what();
    }
    out.machine = machine.rates.name;
    out.kind = machine.kind;
    out.file = path;
    if (probe) out.text = machine_yaml(machine);
    out.digest = probe ? text_digest(out.text) : file_digest(path);
    warnings = machine.implausible;
    return "";
  } catch (const std::exception& e) {
    return std::string("run.machine: ") + e.what();
  }
}

}  // namespace minilst
