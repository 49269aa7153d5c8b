#include "predict/comm_model.hpp"

#include "attention/attention_geometry.hpp"
#include "parallel/ring_reach.hpp"
#include "memory/activation_store.hpp"
#include "model/model_states.hpp"
#include "model/parameters.hpp"
#include "core/tensor_slice.hpp"

namespace minilst {

RingLayerBytes ring_layer_bytes(const AttentionGeometry& g, const std::vector<int>& reach, std::uint64_t T,
                                std::uint64_t acc) {
  using u64 = std::uint64_t;
  RingLayerBytes r;
  const int R = g.R(), me = g.me_ring;
  const u64 Gh = u64(g.kv_heads_here()) * u64(g.head_dim);
  if (R == 1) return r;
  // Rows of the blocks this rank sends at its hops t (block b = me - t), forward and backward (hop_sends)
  const bool rsa = g.parallel.variant == RingVariant::rsa, seed = g.parallel.rsa_seed_backward();
  u64 S = 0, forward = 0, backward = 0;
  for (int t = 0; t < R; ++t) {
    const int b = (me - t + R) % R;
    const u64 n = u64(g.block_rows[b]);
    const HopSends sends = hop_sends(t, reach.empty() ? R - 1 : reach[b], R, rsa, seed);
    S += n;
    forward += u64(sends.forward) * n;
    backward += u64(sends.backward) * n;
  }
  r.forward = 2 * forward * Gh * T;    // K and V (flash: together; RSA: one pass each)
  r.backward = 2 * backward * Gh * T;  // K/V again and the dK/dV accumulators (seed: a pass of V, a pass of K)
  if (seed) {  // two ring all-reduces (dK~, dV~) of [S, Gh]: every chunk but its own, then every chunk but its successor's
    const u64 succ = u64(me + 1) % u64(R);
    r.allreduce = 2 * ((S - u64(g.block_rows[me])) + (S - u64(g.block_rows[succ]))) * Gh * acc;
  }
  return r;
}

namespace {
// Tensor parallelism's bytes (model/tensor_group.hpp): per micro-step, in units of one
// gather's or reduce-scatter's (TP - 1) n d elements (n = S_l / TP: the rank's residual rows):
//   gathers   per layer: rmsnorm(x) (twice where the attention block is recomputed), the MLP's
//             norm (again in its backward unless the store keeps b) and dz, dy before Wo^T,
//             rmsnorm(x) in the backward; the head's norm; dx before the embedding's backward;
//             plus the head's statistics, (TP - 1) TP n 3 elements of the accumulation type
//   reduce-scatters  per layer: o Wo (again where recomputed), m Wd, db, dan; the head's df;
//             the embedding
//   offload's token-wise recompute (token_recompute): per redone layer and its r rows, a gather of
//             rmsnorm(x)'s rows (local q, k, v) and of the MLP's norm (where the store keeps its
//             tensors) and a reduce-scatter of o Wo's, (TP - 1) r d elements each; per layer
//             re-deriving a strategy's kept set, a gather of rmsnorm(x)
//   tp_grad_sum  the replicated gradients, (ranks - 1) x their elements in the accumulation type: the
//             norms (2 L + 1) d over the TP ranks, and where kv heads are replicated the kv projections
//             2 L d k h (k: the rank's kv heads) over the kv_copies ranks holding them; once a step at
//             ZeRO 0, 1, every micro-step at 2, 3
void add_tensor_parallel(CommBytes& bytes, const ModelConfig& local, const ModelOptions& o, const TensorSlice& slice,
                         std::int64_t rows, bool local_layout, int A, int zero_stage, std::uint64_t T, std::uint64_t acc) {
  using u64 = std::uint64_t;
  const u64 TP = u64(slice.ranks), n = u64(rows) / TP, d = u64(local.hidden), L = u64(local.layers);
  const StoreBuffers plan = store_buffers(o.policy, local.layers, o.offload.alpha, std::int64_t(n),
                                          effective_chunks(std::int64_t(n), o.mlp_chunks));
  const u64 passes = plan.recompute_attention() ? 2 : 1, mlp_back = plan.mlp_saved ? 1 : 2;
  const u64 one = (TP - 1) * n * d * T;
  const TokenRecompute redo =
      token_recompute(plan, local.layers, offload_host_rows(o.offload.alpha, std::int64_t(n)), std::int64_t(n), local_layout);
  const u64 row_part = (TP - 1) * u64(redo.rows) * d * T * u64(redo.layers);  // one call in each redone layer
  const u64 redo_gathers = row_part * ((local_layout ? 1 : 0) + (plan.mlp_saved ? 1 : 0)) + one * u64(redo.kept_layers);
  bytes[CommOp::tp_allgather] =
      u64(A) * (one * (L * (passes + 1 + mlp_back + 2) + 2) + (TP - 1) * TP * n * 3 * acc + redo_gathers);
  bytes[CommOp::tp_reduce_scatter] = u64(A) * (one * (L * (passes + 3) + 2) + row_part);
  const u64 norms = (2 * L + 1) * d, kv = 2 * L * d * u64(slice.kv_heads) * u64(local.head_dim());
  const u64 sums = (TP - 1) * norms * acc + u64(slice.kv_copies - 1) * kv * acc;
  bytes[CommOp::tp_grad_sum] = (zero_stage >= 2 ? u64(A) : 1) * sums;
}
}  // namespace

CommBytes predict_comm_bytes(const ModelConfig& model, const ModelOptions& o, const ParallelConfig& par,
                             const SequenceLayout& layout, int s, int ranks, int A, Precision precision,
                             const ZeroOptions& zero) {
  using u64 = std::uint64_t;
  const u64 T = scalar_bytes(precision);  // activations travel in the run's storage type
  // Under tensor parallelism one rank's model (its heads, MLP columns, vocabulary), whose states
  // are reduced and sharded over the ranks holding the same slice.
  const int TP = par.tensor;
  const TensorSlice slice = TP > 1 ? tensor_slice(model, TP, 0) : TensorSlice{};
  const ModelConfig c = TP > 1 ? local_model(model, slice) : model;
  const int world = ranks / TP;
  const auto g = attention_geometry(c, par, layout, s);
  const u64 U = u64(g.U()), h = u64(g.head_dim), L = u64(c.layers);
  const u64 q = u64(g.q_heads_here()), k = u64(g.kv_heads_here());  // heads per member after the all-to-all
  const u64 S_l = u64(g.local_rows), S_g = u64(g.group_rows());
  // policies whose saved sets are transient run the forward attention twice (offload recomputes no attention)
  const StoreBuffers plan = store_buffers(o.policy, c.layers, o.offload.alpha);
  const bool recompute = plan.recompute_attention();
  const u64 passes = recompute ? 2 : 1;

  u64 a2a_fwd = 0, a2a_bwd = 0;
  if (U > 1) {
    const u64 scatter_q = S_l * (U - 1) * q * h * T, scatter_kv = S_l * (U - 1) * k * h * T;
    const u64 gather_q = (S_g - S_l) * q * h * T, gather_kv = (S_g - S_l) * k * h * T;
    a2a_fwd = scatter_q + 2 * scatter_kv + gather_q;
    a2a_bwd = scatter_q + gather_q + 2 * gather_kv;  // dO in; dQ, dK, dV out (q, k, v, o kept head-sharded)
    // offload at alpha 0 keeps them transient: the backward scatters q, k, v and o again (the kept set re-derived)
    if (plan.rederive_kept()) a2a_bwd += 2 * scatter_q + 2 * scatter_kv;
  }
  const u64 acc = master_bytes(precision);  // the accumulation type's bytes: fp32 under bf16, as master weights
  // the ring's bytes per layer: the windowed layers' and the others' (their blocks travel as far as they are seen)
  u64 ring_bytes = 0, allreduce_bytes = 0;
  int windowed = 0;
  const SequenceMask& mask = o.mask;  // documents and window: how far ring blocks travel
  for (int l = 0; l < c.layers; ++l) windowed += mask.windowed(l) ? 1 : 0;
  for (const bool w : {false, true}) {
    const u64 layers = u64(w ? windowed : c.layers - windowed);
    if (layers == 0 || g.R() == 1) continue;
    // head chunks: a ring pass per chunk, each of the chunk's kv heads (all of them where the chunks share one)
    const auto ring = ring_layer_bytes(g.chunk(), ring_reach(layout, mask.of_layers(w)), T, acc);
    const u64 chunks = u64(g.head_chunks);
    ring_bytes += chunks * layers * (passes * ring.forward + ring.backward);
    allreduce_bytes += chunks * layers * ring.allreduce;
  }
  CommBytes bytes;
  bytes[CommOp::alltoall] = u64(A) * L * (passes * a2a_fwd + a2a_bwd);
  bytes[CommOp::ring] = u64(A) * ring_bytes;
  if (par.rsa_seed_backward()) bytes[CommOp::rsa_allreduce] = u64(A) * allreduce_bytes;
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
  bytes[CommOp::allreduce] = allreduce;
  bytes[CommOp::reduce_scatter] = reduce_scatter;
  bytes[CommOp::allgather] = allgather;
  bytes[CommOp::grad_norm] = norm + (TP > 1 ? sizeof(double) : 0);  // (tensor parallel: the group's sum too)
  if (TP > 1) add_tensor_parallel(bytes, c, o, slice, g.local_rows, g.saved_layout().local, A, zero.stage, T, acc);
  return bytes;
}

bool comm_op_used(CommOp op, const ParallelConfig& par, int zero_stage) {
  switch (op) {
    case CommOp::alltoall:
    case CommOp::ring:
    case CommOp::allreduce: return true;
    case CommOp::rsa_allreduce: return par.rsa_seed_backward();
    case CommOp::reduce_scatter:
    case CommOp::allgather:
    case CommOp::grad_norm: return zero_stage > 0;
    case CommOp::tp_allgather:
    case CommOp::tp_reduce_scatter:
    case CommOp::tp_grad_sum: return par.tensor > 1;
    case CommOp::tensor_dump:
    case CommOp::probe: return false;
  }
  return false;
}

}  // namespace minilst
