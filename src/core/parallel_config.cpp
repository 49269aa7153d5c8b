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
  if (p.ulysses_head_chunks > 1 && U == 1)
    return "parallel.ulysses_head_chunks (" + n(p.ulysses_head_chunks) +
           ") chunks the heads of a Ulysses all-to-all: it needs parallel.ulysses > 1 (set it to 1 or auto)";
  if (p.ulysses_head_chunks > 1 && !valid_head_chunks(m, p, p.ulysses_head_chunks))
    return "parallel.ulysses_head_chunks (" + n(p.ulysses_head_chunks) + ") must divide the query heads per Ulysses " +
           "member (model.heads / parallel.ulysses = " + n(m.heads / U) + ") and the kv heads per member (" +
           n(m.kv_heads % U == 0 ? m.kv_heads / U : 1) + ") unless that is 1";
  const std::int64_t min_len = std::int64_t(P) * (p.layout == RingLayout::zigzag && R > 1 ? 2 : 1);
  if (S < min_len)
    return "run.seq_len (" + n(S) + ") must be at least " + n(min_len) + " so that every rank holds a token (" +
           (p.layout == RingLayout::zigzag && R > 1 ? "2 x " : "") + "parallel.ulysses x parallel.ring)";
  return "";
}

bool valid_head_chunks(const ModelConfig& m, const ParallelConfig& p, int n) {
  const int U = p.ulysses;
  if (n < 1 || U < 1 || m.heads % U != 0) return false;
  const int q_here = m.heads / U, kv_here = m.kv_heads % U == 0 ? m.kv_heads / U : 1;
  return q_here % n == 0 && (kv_here % n == 0 || kv_here == 1);
}

int head_chunks(const ModelConfig& m, const ParallelConfig& p) {
  if (p.ulysses <= 1) return 1;
  if (p.ulysses_head_chunks > 0) return p.ulysses_head_chunks;
  // (with a ring behind Ulysses, only counts that split the kv heads: a kv head every chunk
  // shares would go round the ring once per chunk)
  const int kv_here = m.kv_heads % p.ulysses == 0 ? m.kv_heads / p.ulysses : 1;
  for (int n = kAutoHeadChunks; n > 1; --n)
    if (valid_head_chunks(m, p, n) && (p.ring == 1 || kv_here % n == 0)) return n;
  return 1;
}

void resolve_ulysses(const ModelConfig& m, ParallelConfig& p, int world) {
  if (p.ulysses != 0) return;
  p.ulysses = 1;
  if (p.ring < 1 || world < 1 || world % p.ring != 0) return;
  const int left = world / p.ring;
  for (int U = left; U > 1; --U) {
    const bool kv = m.kv_heads % U == 0 || (m.kv_heads > 0 && U % m.kv_heads == 0);
    if (left % U == 0 && m.heads % U == 0 && kv) {
      p.ulysses = U;
      return;
    }
  }
}

std::string check_zero(const ParallelConfig& p, int world, bool optimizer_offload) {
  if (world > 1 || p.zero == 0 || (p.zero == 2 && optimizer_offload)) return "";
  return "parallel.zero = " + std::to_string(p.zero) + " on " + std::to_string(world) +
         " rank: there is nothing to shard, the stage would only add buffers; set parallel.zero: 0, run on 2 or "
         "more ranks, or (one device with memory.optimizer_offload: true) parallel.zero: 2, which moves the "
         "gradient to the host unit by unit";
}

}  // namespace minilst
