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

std::string check_zero(const ParallelConfig& p, int world) {
  if (p.zero > 0 && world < 2)
    return "parallel.zero = " + std::to_string(p.zero) + " shards the model states over the job's ranks, but the job "
           "has " + std::to_string(world) + " rank: set parallel.zero: 0, or run on 2 or more ranks";
  return "";
}

}  // namespace minilst
