#include "core/parallel_config.hpp"

namespace minilst {

std::string check_parallel(const ModelConfig& m, const ParallelConfig& p, std::int64_t S, int world) {
  const auto n = [](long long x) { return std::to_string(x); };
  const int U = p.ulysses, R = p.ring, P = p.sequence_parallel();
  if (world % P != 0)
    return "the world size (" + n(world) + " ranks) is not a multiple of parallel.ulysses x parallel.ring (" + n(U) +
           " x " + n(R) + " = " + n(P) + ")";
  if (m.heads % U != 0)
    return "model.heads (" + n(m.heads) + ") is not divisible by the Ulysses degree parallel.ulysses (" + n(U) + ")";
  if (m.kv_heads % U != 0 && !(m.kv_heads < U && U % m.kv_heads == 0))
    return "model.kv_heads (" + n(m.kv_heads) + ") and parallel.ulysses (" + n(U) +
           "): the kv heads must be a multiple of the Ulysses degree, or divide it (then they are replicated)";
  const std::int64_t min_len = std::int64_t(P) * (p.layout == RingLayout::zigzag && R > 1 ? 2 : 1);
  if (S < min_len)
    return "run.seq_len (" + n(S) + ") must be at least " + n(min_len) + " so that every rank holds a token (" +
           (p.layout == RingLayout::zigzag && R > 1 ? "2 x " : "") + "parallel.ulysses x parallel.ring)";
  return "";
}

std::string check_zero(const ParallelConfig& p, int world, bool optimizer_offload) {
  if (world > 1 || p.zero == 0 || (p.zero == 2 && optimizer_offload)) return "";
  return "parallel.zero = " + std::to_string(p.zero) + " on " + std::to_string(world) +
         " rank: there is nothing to shard, the stage would only add buffers; set parallel.zero: 0, run on 2 or "
         "more ranks, or (one device with memory.optimizer_offload: true) parallel.zero: 2, which moves the "
         "gradient to the host unit by unit";
}

}  // namespace minilst
