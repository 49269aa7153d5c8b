// Test-only fault injection, so that tests can show `minilst verify` catches a broken
// layout (and names the first tensor it breaks). Read from the environment variable
// MINILST_TEST_FAULT; nothing happens unless it is set:
//   MINILST_TEST_FAULT=mask_drop:RANK  world rank RANK's attention drops the mask: plain causal
//                                      attention, the documents and the sliding window ignored
//                                      (the rotary positions kept; verify's strategies; a
//                                      ring's schedule, what travels where, kept)
//   MINILST_TEST_FAULT=stale_kv:RANK   on a ring (R > 1), world rank RANK's flash forward
//                                      computes its last hop on the stale K/V of the hop
//                                      before (the buffer not refreshed; ring_attention.cpp)
// Any other value is refused before any work (`minilst run` and `minilst verify`: exit 2,
// naming the variable). Never set it outside tests.
#pragma once

#include <mpi.h>

#include <cstdlib>
#include <string>


namespace minilst::fault {

enum class Kind { none, mask_drop, stale_kv };

struct Fault {
  Kind kind = Kind::none;
  int rank = -1;          // the world rank the fault strikes
  std::string problem;    // "" or why the variable's value is refused
};

constexpr const char* kVariable = "MINILST_TEST_FAULT";

// "KIND:RANK" with KIND mask_drop or stale_kv and RANK a decimal rank >= 0.
inline Fault parse(const std::string& text) {
  Fault f;
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon), rank = colon == std::string::npos ? "" : text.substr(colon + 1);
  const bool digits = !rank.empty() && rank.size() < 8 && rank.find_first_not_of("0123456789") == std::string::npos;
  if ((kind == "mask_drop" || kind == "stale_kv") && digits) {
    f.kind = kind == "mask_drop" ? Kind::mask_drop : Kind::stale_kv;
    f.rank = std::stoi(rank);
  } else {
    f.problem = std::string(kVariable) + "='" + text + "' is not a known fault (mask_drop:RANK or stale_kv:RANK)";
  }
  return f;
}

// The process's fault, read once.
inline const Fault& active() {
  static const Fault f = [] {
    const char* text = std::getenv(kVariable);
    return text ? parse(text) : Fault{};
  }();
  return f;
}

inline bool strikes_here(Kind kind) {
  const Fault& f = active();
  if (f.kind != kind) return false;
  int initialized = 0, rank = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank == f.rank;
}

// mask_drop: whether this rank's attention strategy is built with plain causal masking.
inline bool mask_dropped_here() { return strikes_here(Kind::mask_drop); }

// stale_kv: whether ring step `hop` of `hops` computes on the previous hop's buffer. The last
// hop (no transfer is posted during it, so the previous buffer still holds the block before).
inline bool stale_kv_hop(int hop, int hops) { return hops > 1 && hop == hops - 1 && strikes_here(Kind::stale_kv); }

}  // namespace minilst::fault
