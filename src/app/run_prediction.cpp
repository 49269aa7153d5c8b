#include "app/run_prediction.hpp"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "app/machine_file.hpp"
#include "app/plan.hpp"
#include "core/fnv1a.hpp"

namespace minilst {

std::string file_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("machine file " + path + ": cannot be read");
  Fnv1a digest;
  digest.add(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
  return digest.hex();
}

std::string predict_run(const Deck& deck, int ranks, StepPrediction& out, std::vector<std::string>& warnings) {
  const std::string& path = deck.run.machine;
  try {
    const MachineFile machine = load_machine_file(path);  // throws naming the file and its key
    std::string error;
    const StepTime t = predict_deck_time(deck, ranks, machine.rates, error);
    if (!error.empty()) return "run.machine: machine file " + path + ": cannot price this deck on " +
                               std::to_string(ranks) + " rank(s): " + error;
    out.seconds = t.phases;
    out.machine = machine.rates.name;
    out.kind = machine.kind;
    out.file = path;
    out.digest = file_digest(path);
    warnings = machine.implausible;
    return "";
  } catch (const std::exception& e) {
    return std::string("run.machine: ") + e.what();
  }
}

}  // namespace minilst
