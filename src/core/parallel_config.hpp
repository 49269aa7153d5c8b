// The sequence-parallel configuration (deck section `parallel`) and its rules.
// World = D x U x R ranks: U-way Ulysses inside groups of consecutive ranks, an
// R-member ring across the groups, and the remaining factor D data parallel
// (each replica its own token stream; gradients averaged over everyone).
#pragma once

#include <cstdint>
#include <string>

#include "core/config.hpp"
#include "core/names.hpp"

namespace minilst {

// How the ring members' tokens are chosen (parallel/sequence_layout.hpp): contiguous
// pieces, zigzag chunk pairs, or balanced (chunks assigned by their attention cost
// under the run's mask: packed documents, a sliding window).
enum class RingLayout { contiguous, zigzag, balanced };
template <>
struct EnumNames<RingLayout> {  // the deck's default first
  static constexpr std::array<std::pair<RingLayout, const char*>, 3> table{
      {{RingLayout::zigzag, "zigzag"}, {RingLayout::contiguous, "contiguous"}, {RingLayout::balanced, "balanced"}}};
};
enum class RingVariant { flash, rsa };
template <>
struct EnumNames<RingVariant> {
  static constexpr std::array<std::pair<RingVariant, const char*>, 2> table{
      {{RingVariant::flash, "flash"}, {RingVariant::rsa, "rsa"}}};
};
// RSA's backward (parallel.rsa_backward; only read with ring_variant rsa):
//   seed   the seed paper's: forward keeps the softmax probabilities P [Hl Sq, S];
//          a ring of V blocks (dV partials, dS), a ring of K blocks (dQ, dK
//          partials), then ring all-reduces of the [S, Gl h] dK and dV partials;
//   flash  the flash ring's backward, from the log-sum-exp rows.
enum class RsaBackward { seed, flash };
template <>
struct EnumNames<RsaBackward> {  // the deck's default first
  static constexpr std::array<std::pair<RsaBackward, const char*>, 2> table{
      {{RsaBackward::seed, "seed"}, {RsaBackward::flash, "flash"}}};
};

struct ParallelConfig {
  int ulysses = 1;                         // U (0: auto, until resolve_ulysses gives it the world's)
  int ring = 1;                            // R
  RingLayout layout = RingLayout::zigzag;
  RingVariant variant = RingVariant::flash;
  RsaBackward rsa_backward = RsaBackward::seed;  // read only when variant is rsa
  bool overlap = true;                     // ring transfers overlap block compute
  // Head-chunked Ulysses: attention runs over N chunks of each member's heads, one
  // at a time (parallel.ulysses_head_chunks; 0 = auto, resolved by head_chunks()).
  int ulysses_head_chunks = 1;
  int zero = 0;                            // ZeRO stage over all ranks: 0 none, 1 optimizer, 2 + gradients, 3 + weights
  int tensor = 1;                          // T: the tensor-parallel degree (core/tensor_slice.hpp), innermost
  int sequence_parallel() const { return ulysses * ring; }
  // Whether the ring runs RSA with the seed's backward: its statistics are the
  // softmax probabilities [Hl Sq, S] rather than the log-sum-exp rows [Sq, Hl].
  bool rsa_seed_backward() const {
    return ring > 1 && variant == RingVariant::rsa && rsa_backward == RsaBackward::seed;
  }
};

// The Ulysses head chunks N a run uses: the deck's, or for auto the largest valid N up to
// kAutoHeadChunks (with a ring, one that splits the kv heads: a shared one would go round the
// ring once per chunk); 1 without Ulysses. Heads here are one tensor-parallel rank's. Valid: N divides the query heads per member H/U, and
// the kv heads per member (each chunk its whole kv groups) unless a member holds one kv
// head, which every chunk then reads (it travels once).
constexpr int kAutoHeadChunks = 4;
bool valid_head_chunks(const ModelConfig& model, const ParallelConfig& par, int n);
int head_chunks(const ModelConfig& model, const ParallelConfig& par);

// parallel.ulysses auto (0): the largest U that divides world / R and that the heads allow
// (H % U == 0; the kv heads a multiple of U, or dividing it): Ulysses over every rank the ring
// leaves where the heads allow, data parallel over the rest (1 where world / R is no whole
// number: the world check then names it). A given U is kept.
void resolve_ulysses(const ModelConfig& model, ParallelConfig& par, int world);

// Empty when the configuration can run on world_size ranks; otherwise a message
// naming the keys and the constraint (the same on every rank, before any work).
std::string check_parallel(const ModelConfig& model, const ParallelConfig& par, std::int64_t seq_len, int world_size);
// parallel.zero against the job's world size (the deck alone cannot tell: the
// data-parallel factor is the job's). On one rank there is nothing to shard: a stage
// only adds buffers, except stage 2 with optimizer offload (the gradient leaves the
// device unit by unit: ZeRO-Offload on one device), which is allowed.
std::string check_zero(const ParallelConfig& par, int world_size, bool optimizer_offload);

}  // namespace minilst
