#include "predict/fit_check.hpp"

#include <cmath>
#include <cstdio>

#include "core/units.hpp"

namespace minilst {

namespace {

std::string refusal(double need, double have, const char* what) {
  char msg[512];
  std::snprintf(msg, sizeof msg,
                "the run needs %.1f MiB of %s per rank (memory model) but %.1f MiB are available per rank: "
                "lower run.seq_len, use memory.policy checkpoint or offload, parallel.zero, "
                "memory.optimizer_offload, or more ranks "
                "(`minilst plan DECK --max-seq-len --device-mib N` finds what fits)",
                need / kMiB, what, have / kMiB);
  return msg;
}
}  // namespace

std::string check_lower_bound(const Deck& deck, const std::map<std::string, std::uint64_t>& states,
                              const AvailableMemory& avail) {
  const double T = double(scalar_bytes(deck.run.precision));
  const double local_tokens = std::ceil(double(deck.run.seq_len) / deck.parallel.sequence_parallel());
  // The model states' host part against the host budget, their device part plus one [S_local, d]
  // activation against the memory.
  const double host_states = double(states.at("host_optimizer"));
  if (deck.memory.optimizer_offload && !deck.memory.host_budget_auto &&
      host_states > deck.memory.host_budget_mib * kMiB) {
    char msg[400];
    std::snprintf(msg, sizeof msg,
                  "memory.optimizer_offload keeps %.1f MiB of optimizer states per rank in host memory, more than "
                  "memory.host_budget_mib = %g: raise the budget, or shard the states further (a higher parallel.zero, "
                  "more ranks)",
                  host_states / kMiB, deck.memory.host_budget_mib);
    return msg;
  }
  const bool cuda = avail.device > 0;
  const double budget = cuda ? avail.device : avail.host;
  const double lower = double(states.at("device_total")) + T * local_tokens * deck.model.hidden + (cuda ? 0 : host_states);
  if (budget > 0 && lower > budget) return refusal(lower, budget, cuda ? "device memory" : "memory");
  if (cuda && avail.host > 0 && host_states > avail.host) return refusal(host_states, avail.host, "host memory");
  return "";
}

std::string check_fits(const Deck& deck, const DeckPlan& p, const AvailableMemory& avail) {
  const double host_inputs = 2.0 * 8.0 * double(deck.run.grad_accum) * double(deck.run.seq_len);  // tokens, labels
  const double device = double(p.device_planned), host = p.host_bytes() + host_inputs;
  if (avail.device > 0) {
    if (device > avail.device) return refusal(device, avail.device, "device memory");
    if (avail.host > 0 && host > avail.host) return refusal(host, avail.host, "host memory");
  } else if (avail.host > 0 && device + host > avail.host) {
    return refusal(device + host, avail.host, "memory (device and host are one here)");
  }
  return "";
}

}  // namespace minilst
