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
  const int P = sh.world, zero = sh.parallel.zero;
  if (P <= 1) return s;
  const double A = c.A, units = c.L + 2;
  const auto bytes = [&](CommOp op) { return double(sh.comm[op]); };
  if (zero <= 1) s.allreduce = c.m.link(LinkOp::allreduce, P).seconds(bytes(CommOp::allreduce));
  s.comm += s.allreduce;
  if (zero >= 2) {
    const double rs = c.m.link(LinkOp::reduce_scatter, P).seconds(bytes(CommOp::reduce_scatter), A * units);
    s.last_reduce_scatter = rs / (A * units);
    s.grad_reduce = std::max(0.0, rs - A * backward) + s.last_reduce_scatter;
    s.comm += s.last_reduce_scatter;
  }
  if (zero == 1 || zero == 2) {
    s.gather_after = c.m.link(LinkOp::allgather, P).seconds(bytes(CommOp::allgather), units);
    s.comm += s.gather_after;
  }
  if (zero == 3) {
    const double ag = c.m.link(LinkOp::allgather, P).seconds(bytes(CommOp::allgather), A * 2 * units);
    s.gather_beside = std::max(0.0, ag - A * (forward + backward)) + ag / (A * 2 * units);
  }
  return s;
}

}  // namespace minilst
