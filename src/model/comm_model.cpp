#include "model/comm_model.hpp"

#include "attention/attention_geometry.hpp"
#include "memory/activation_store.hpp"
#include "model/model_states.hpp"
#include "model/parameters.hpp"

namespace minilst {

std::map<std::string, std::uint64_t> predict_comm_bytes(const ModelConfig& c, const ModelOptions& o,
                                                        const ParallelConfig& par, const SequenceLayout& layout,
                                                        int s, int world, int A, Precision precision,
                                                        const ZeroOptions& zero) {
  using u64 = std::uint64_t;
  const u64 T = scalar_bytes(precision);  // activations travel in the run's storage type
  const auto g = attention_geometry(c, par, layout, s);
  const u64 U = u64(g.U()), R = u64(g.R()), h = u64(g.head_dim), L = u64(c.layers);
  const u64 q = u64(g.q_heads_here()), k = u64(g.kv_heads_here());  // heads per member after the all-to-all
  const u64 S_l = u64(g.local_rows), S_g = u64(g.group_rows());
  // policies whose saved sets are transient run the forward attention twice (offload recomputes no attention)
  const bool recompute = store_plan(o.policy, c.layers).saved_buffers == 0;
  const u64 passes = recompute ? 2 : 1;

  u64 a2a_fwd = 0, a2a_bwd = 0;
  if (U > 1) {
    const u64 scatter_q = S_l * (U - 1) * q * h * T, scatter_kv = S_l * (U - 1) * k * h * T;
    const u64 gather_q = (S_g - S_l) * q * h * T, gather_kv = (S_g - S_l) * k * h * T;
    a2a_fwd = scatter_q + 2 * scatter_kv + gather_q;
    a2a_bwd = 3 * scatter_q + 2 * scatter_kv + gather_q + 2 * gather_kv;
  }
  u64 ring_fwd = 0, ring_bwd = 0;
  if (R > 1) {
    for (u64 b = 0; b < R; ++b) {
      const u64 block = 2 * u64(g.block_rows[b]) * k * h * T;  // K and V
      if (b != (u64(g.me_ring) + 1) % R) ring_fwd += block;     // the last visitor is never passed on
      ring_bwd += block;                                         // every block's dK/dV travels
    }
    ring_bwd += ring_fwd;  // K/V travel again in backward
  }
  std::map<std::string, std::uint64_t> bytes;
  bytes["alltoall"] = u64(A) * L * (passes * a2a_fwd + a2a_bwd);
  bytes["ring"] = u64(A) * L * (passes * ring_fwd + ring_bwd);
  // The model states' collectives (ZeRO): over every rank, unit by unit (model_states.hpp).
  const u64 G = master_bytes(precision);  // fp32 under bf16
  const auto sl = shard_layout(c, world, zero.stage > 0);
  u64 allreduce = 0, reduce_scatter = 0, allgather = 0, norm = 0;
  if (world > 1) {
    const u64 others = u64(world - 1);
    if (zero.stage <= 1) allreduce = u64(sl.padded_total) * G;
    if (zero.stage >= 2) {
      for (const auto& u : sl.units) reduce_scatter += u64(A) * others * u.shard * G;
      norm = sizeof(double);
    }
    if (zero.stage == 1 || zero.stage == 2)
      for (const auto& u : sl.units) allgather += others * u.shard * T;
    if (zero.stage == 3)
      for (int a = 0; a < A; ++a)
        for (const int u : unit_gather_order(c.layers, a == 0)) allgather += others * sl.units[u].shard * T;
  }
  bytes["allreduce"] = allreduce;
  if (zero.stage > 0) {
    bytes["reduce_scatter"] = reduce_scatter;
    bytes["allgather"] = allgather;
    bytes["grad_norm"] = norm;
  }
  return bytes;
}

}  // namespace minilst
