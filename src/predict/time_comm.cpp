// The copies and collectives of the time model (time_model.hpp): the copy engine's offload
// (memory/copy_engine.hpp) and the model states' collectives under ZeRO (model_states.cpp).
#include <algorithm>
#include <stdexcept>

#include "core/units.hpp"
#include "model/parameters.hpp"
#include "predict/time_model.hpp"

namespace minilst {

// The copy engine (a thread or a CUDA stream beside the compute) moves layer l's tensors while
// layer l + 1 computes: per layer max(0, copy - compute), each way; the last layer's copy has no
// compute behind it.
OffloadPrice price_offload(const PriceContext& c, double forward_layer, double backward_layer) {
  OffloadPrice o;
  const PricedStep& sh = c.step;
  if (!uses_host_memory(sh.options.policy) || sh.offload_bytes == 0) return o;
  if (!(c.m.host_link_gbs > 0)) throw std::runtime_error("machine file: host_link.gbs is missing or not positive");
  const double B_copy = c.m.host_link_gbs * kGiga;
  const double per_layer = double(sh.offload_bytes) / c.L / B_copy;
  o.wait = c.A * (c.L * std::max(0.0, per_layer - forward_layer) + c.L * std::max(0.0, per_layer - backward_layer) + per_layer);
  o.copy_engine_busy = c.A * 2.0 * double(sh.offload_bytes) / B_copy;
  return o;
}

// The model states' collectives over every rank (P): ZeRO 0, 1 the gradient's all-reduce after the
// micro-steps; 2, 3 reduce-scatters posted per unit in the backward, exposed past its compute, the
// last one's wait in comm; 1, 2 the new weights' all-gathers after AdamW (in comm); 3 each unit's
// gather beside the previous unit's compute, the first exposed. Units: the embedding, the layers, the head.
StatesPrice price_states(const PriceContext& c, double forward, double backward) {
  StatesPrice s;
  const PricedStep& sh = c.step;
  const int T = sh.parallel.tensor, P = sh.world / T, zero = sh.parallel.zero;  // the ranks holding one slice, T apart
  if (P <= 1) return s;
  const double A = c.A, units = c.L + 2;
  const auto bytes = [&](CommOp op) { return double(sh.comm[op]); };
  if (zero <= 1) s.allreduce = c.m.link(LinkOp::allreduce, P, T).seconds(bytes(CommOp::allreduce));
  s.comm += s.allreduce;
  if (zero >= 2) {
    const double rs = c.m.link(LinkOp::reduce_scatter, P, T).seconds(bytes(CommOp::reduce_scatter), A * units);
    s.last_reduce_scatter = rs / (A * units);
    s.grad_reduce = std::max(0.0, rs - A * backward) + s.last_reduce_scatter;
    s.comm += s.last_reduce_scatter;
  }
  if (zero == 1 || zero == 2) {
    s.gather_after = c.m.link(LinkOp::allgather, P, T).seconds(bytes(CommOp::allgather), units);
    s.comm += s.gather_after;
  }
  if (zero == 3) {
    const double ag = c.m.link(LinkOp::allgather, P, T).seconds(bytes(CommOp::allgather), A * 2 * units);
    s.gather_beside = std::max(0.0, ag - A * (forward + backward)) + ag / (A * 2 * units);
  }
  return s;
}

}  // namespace minilst

namespace minilst {

// Tensor parallelism's gathers and reduce-scatters (model/tensor_group.hpp; the calls counted as
// comm_model.cpp's add_tensor_parallel counts their bytes), each call's time its share of the
// operation's bytes by call count: the blocks' calls carry equal bytes (the head's statistics apart).
// A gather is the allgather link's; a reduce-scatter the alltoall link's plus its sum kernel.
TensorPrice price_tensor(const PriceContext& c) {
  TensorPrice t;
  const PricedStep& sh = c.step;
  const int TP = sh.parallel.tensor;
  if (TP <= 1) return t;
  const auto bytes = [&](CommOp op) { return double(sh.comm[op]); };
  const double A = c.A, L = c.L, M = c.mlp_chunks, H = c.head_chunks;
  const double passes = c.store.recompute_attention() ? 2 : 1, mlp_back = c.store.mlp_saved ? 1 : 2;
  // offload's token-wise recompute: a gather of rmsnorm(x)'s rows (local q, k, v) and of the MLP's
  // norm (its tensors kept), a reduce-scatter of o Wo's, per redone layer; a gather per kept set re-derived
  const TokenRecompute redo = token_recompute(c);
  const double redo_gathers = redo.layers * ((c.g.saved_layout().local ? 1 : 0) + (c.store.mlp_saved ? 1 : 0)) +
                              redo.kept_layers;
  const double gathers = L * (passes + M * (1 + mlp_back) + 2) + 2 * H + 1 + redo_gathers,
               scatters = L * (passes + 2 * M + 1) + H + 1 + redo.layers;
  const double g = c.m.link(LinkOp::allgather, TP).seconds(bytes(CommOp::tp_allgather), A * gathers) / (A * gathers);
  // a reduce-scatter is an all-to-all of the row blocks, then the sum of the T received blocks into the
  // rank's rows (a kernel reading T n w and reading and writing n w elements: (T + 2) / (T - 1) of the
  // bytes sent)
  const double sent = bytes(CommOp::tp_reduce_scatter);
  const double r = (c.m.link(LinkOp::alltoall, TP).seconds(sent, A * scatters) +
                    sent * (TP + 2.0) / (TP - 1.0) / c.B_el) / (A * scatters) + c.t_op;
  t.mlp = A * (M * (1 + mlp_back) * g + 2 * M * r);
  t.lm_head = A * H * (2 * g + r);
  t.forward = A * (L * (1 + M) * (g + r) + 2 * H * g + H * r + r);  // attention and MLP blocks, head, embedding
  const double sums = sh.parallel.zero >= 2 ? A * (L + 2) : 1.0;  // a call per unit and micro-step, or one a step
  t.grad_sum = c.m.link(LinkOp::allgather, TP).seconds(bytes(CommOp::tp_grad_sum), sums);
  t.total = A * (gathers * g + scatters * r) + t.grad_sum;
  return t;
}

}  // namespace minilst
