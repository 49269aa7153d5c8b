#include "core/parallel_config.hpp"

#include "core/tensor_slice.hpp"

namespace minilst {

namespace {
// The heads a sequence-parallel rank splits: one tensor-parallel rank's (the whole model's at T = 1).
ModelConfig heads_of_one_rank(const ModelConfig& m, int T) {
  return T > 1 ? local_model(m, tensor_slice(m, T, 0)) : m;
}
}  // namespace

std::string check_parallel(const ModelConfig& model, const ParallelConfig& p, std::int64_t S, int world) {
  const auto n = [](long long x) { return std::to_string(x); };
  const int U = p.ulysses, R = p.ring, P = p.sequence_parallel(), T = p.tensor;
  if (T < 1) return "parallel.tensor (" + n(T) + ") must be at least 1";
  if (world % (P * T) != 0)
    return T > 1 ? "the world size (" + n(world) + " ranks) is not a multiple of parallel.tensor x parallel.ulysses x "
                   "parallel.ring (" + n(T) + " x " + n(U) + " x " + n(R) + " = " + n(P * T) + ")"
                 : "the world size (" + n(world) + " ranks) is not a multiple of parallel.ulysses x parallel.ring (" +
                   n(U) + " x " + n(R) + " = " + n(P) + ")";
  if (const auto why = check_tensor_slice(model, T); !why.empty()) return why;
  const ModelConfig m = heads_of_one_rank(model, T);  // Ulysses splits one tensor-parallel rank's heads
  const std::string per_rank = T > 1 ? " per tensor-parallel rank (model.heads / parallel.tensor)" : "";
  const std::string kv_per_rank = T > 1 ? " per tensor-parallel rank" : "";
  if (m.heads % U != 0)
    return "model.heads (" + n(m.heads) + per_rank + ") is not divisible by the Ulysses degree parallel.ulysses (" +
           n(U) + ")";
  if (m.kv_heads % U != 0 && !(m.kv_heads < U && U % m.kv_heads == 0))
    return "model.kv_heads (" + n(m.kv_heads) + kv_per_rank + ") and parallel.ulysses (" + n(U) +
           "): the kv heads must be a multiple of the Ulysses degree, or divide it (then they are replicated)";
  if (p.ulysses_head_chunks > 1 && U == 1)
    return "parallel.ulysses_head_chunks (" + n(p.ulysses_head_chunks) +
           ") chunks the heads of a Ulysses all-to-all: it needs parallel.ulysses > 1 (set it to 1 or auto)";
  if (p.ulysses_head_chunks > 1 && !valid_head_chunks(model, p, p.ulysses_head_chunks))
    return "parallel.ulysses_head_chunks (" + n(p.ulysses_head_chunks) + ") must divide the query heads per Ulysses " +
           "member (model.heads / parallel.ulysses = " + n(m.heads / U) + ") and the kv heads per member (" +
           n(m.kv_heads % U == 0 ? m.kv_heads / U : 1) + ") unless that is 1";
  const std::int64_t min_len = std::int64_t(P) * (p.layout == RingLayout::zigzag && R > 1 ? 2 : 1);
  if (S < min_len)
    return "run.seq_len (" + n(S) + ") must be at least " + n(min_len) + " so that every rank holds a token (" +
           (p.layout == RingLayout::zigzag && R > 1 ? "2 x " : "") + "parallel.ulysses x parallel.ring)";
  // Sequence parallelism inside the tensor-parallel group: each rank of it holds 1/T of its
  // sequence piece (even pieces: seq_len divisible by every split).
  if (T > 1 && S % (min_len * T) != 0)
    return "run.seq_len (" + n(S) + ") must be divisible by " + n(min_len * T) + " (" +
           (p.layout == RingLayout::zigzag && R > 1 ? "2 x " : "") +
           "parallel.ulysses x parallel.ring x parallel.tensor): the tensor-parallel ranks split each sequence "
           "piece's tokens evenly";
  return "";
}

bool valid_head_chunks(const ModelConfig& model, const ParallelConfig& p, int n) {
  const int U = p.ulysses;
  if (n < 1 || U < 1 || p.tensor < 1 || !check_tensor_slice(model, p.tensor).empty()) return false;
  const ModelConfig m = heads_of_one_rank(model, p.tensor);
  if (m.heads % U != 0) return false;
  const int q_here = m.heads / U, kv_here = m.kv_heads % U == 0 ? m.kv_heads / U : 1;
  return q_here % n == 0 && (kv_here % n == 0 || kv_here == 1);
}

int head_chunks(const ModelConfig& model, const ParallelConfig& p) {
  if (p.ulysses <= 1) return 1;
  if (p.ulysses_head_chunks > 0) return p.ulysses_head_chunks;
  if (p.tensor < 1 || !check_tensor_slice(model, p.tensor).empty()) return 1;
  const ModelConfig m = heads_of_one_rank(model, p.tensor);
  // (with a ring behind Ulysses, only counts that split the kv heads: a kv head every chunk
  // shares would go round the ring once per chunk)
  const int kv_here = m.kv_heads % p.ulysses == 0 ? m.kv_heads / p.ulysses : 1;
  for (int n = kAutoHeadChunks; n > 1; --n)
    if (valid_head_chunks(model, p, n) && (p.ring == 1 || kv_here % n == 0)) return n;
  return 1;
}

void resolve_ulysses(const ModelConfig& model, ParallelConfig& p, int world) {
  if (p.ulysses != 0) return;
  p.ulysses = 1;
  const int T = p.tensor;
  if (p.ring < 1 || T < 1 || world < 1 || world % (p.ring * T) != 0 || !check_tensor_slice(model, T).empty()) return;
  const ModelConfig m = heads_of_one_rank(model, T);
  const int left = world / (p.ring * T);
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
