// The sequence-parallel configuration (deck section `parallel`) and its rules.
// World = D x U x R ranks: U-way Ulysses inside groups of consecutive ranks, an
// R-member ring across the groups, and the remaining factor D data parallel
// (each replica its own token stream; gradients averaged over everyone).
#pragma once

#include <cstdint>
#include <string>

#include "model/config.hpp"

namespace minilst {

enum class RingLayout { contiguous, zigzag };
enum class RingVariant { flash, rsa };

struct ParallelConfig {
  int ulysses = 1;                         // U
  int ring = 1;                            // R
  RingLayout layout = RingLayout::zigzag;
  RingVariant variant = RingVariant::flash;
  bool overlap = true;                     // ring transfers overlap block compute
  int sequence_parallel() const { return ulysses * ring; }
};

// Empty when the configuration can run on world_size ranks; otherwise a message
// naming the keys and the constraint (the same on every rank, before any work).
std::string check_parallel(const ModelConfig& model, const ParallelConfig& par, std::int64_t seq_len, int world_size);

std::string to_string(RingLayout l);
std::string to_string(RingVariant v);

}  // namespace minilst
