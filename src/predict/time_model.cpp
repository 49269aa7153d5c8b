// predict_step_time: the phase families priced (time_compute.cpp, time_attention.cpp,
// time_comm.cpp) and added up into the run's phases; the formulas are in time_model.hpp.
#include "predict/time_model.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/range.hpp"
#include "core/units.hpp"

namespace minilst {

namespace {
}  // namespace

PriceContext price_context(const PricedStep& sh, const MachineRates& m) {
  const ModelConfig& c = sh.model;
  PriceContext x{sh, m, attention_geometry(c, sh.parallel, sh.layout, sh.sp_rank), sh.precision};
  x.T = double(scalar_bytes(sh.precision)), x.A = sh.grad_accum, x.L = c.layers;
  x.d = c.hidden, x.h = c.head_dim(), x.Hh = double(c.heads) * x.h, x.Gh = double(c.kv_heads) * x.h;
  x.I = c.intermediate, x.V = c.vocab;
  x.S_l = double(x.g.local_rows);
  x.t_op = m.op_overhead_us * kMicro;
  if (!(m.elementwise_gbs > 0)) throw std::runtime_error("machine file: elementwise_gbs is missing or not positive");
  x.B_el = m.elementwise_gbs * kGiga;
  const std::int64_t residual = x.g.local_rows / sh.parallel.tensor;  // the rows the MLP and head chunk
  x.residual = residual;
  x.mlp_chunks = std::max(1, effective_chunks(residual, sh.options.mlp_chunks));
  x.store = store_buffers(sh.options.policy, c.layers, sh.options.offload.alpha, residual, x.mlp_chunks);
  x.head_chunks = std::max(1, effective_chunks(residual, sh.options.lm_head_chunks));
  return x;
}

TokenRecompute token_recompute(const PriceContext& c) {
  return token_recompute(c.store, int(c.L), offload_host_rows(c.step.options.offload.alpha, c.residual), c.residual,
                         c.g.saved_layout().local);
}

// Checkpointing (activation_store.cpp) redoes each layer's attention block: norm, q/k/v, attention,
// o (the MLP's input; the MLP's backward recomputes its own gate/up). Offload redoes the token rows
// it did not move, 1 - alpha of them (all where no row set is kept), in the layers whose row set
// lost its buffer to a later layer (ActivationStore::backward_begin), averaged per layer: their
// projections and o, and the MLP where the row set holds it.
RecomputePrice price_recompute(const PriceContext& c, const LayerPrice& layer, const AttentionPrice& attention) {
  RecomputePrice r;
  const StoreBuffers& plan = c.store;
  if (plan.recompute_attention()) {
    r.attention = attention.fwd;
    r.layer = layer.proj_fwd + attention.fwd;
  } else if (c.step.options.policy == MemoryPolicy::offload) {
    const TokenRecompute redo = token_recompute(c);
    const double rows = double(redo.rows) / double(c.residual) * redo.layers / c.L;
    r.mlp = plan.mlp_saved ? rows * layer.mlp_fwd : 0;
    r.layer = rows * layer.proj_fwd + r.mlp;
  }
  return r;
}

namespace {
// The phases of the step from the families' prices (the run's timers: core/phases.hpp).
StepTime add_up(const PriceContext& c, const LayerPrice& layer, const AttentionPrice& attn, const AlltoallPrice& a2a,
                double head, const RecomputePrice& rec, const OffloadPrice& off, const StatesPrice& st, double optimizer,
                const TensorPrice& tp) {
  const double A = c.A, L = c.L;
  const double layers_fwd = L * (layer.proj_fwd + attn.fwd + layer.mlp_fwd) + head;
  const double layers_bwd = L * (layer.proj_bwd + attn.bwd + layer.mlp_bwd) + L * rec.layer;
  const bool recompute = c.store.recompute_attention();
  StepTime t;
  PhaseSeconds& ph = t.phases;
  // head chunks on a device: gathers hidden behind the next chunk's attention, at most its time
  const double hidden = std::min(a2a.overlappable, A * L * (attn.fwd + attn.bwd + rec.attention));
  const double a2a_exposed = a2a.total - hidden;
  ph[Phase::attention] = A * L * (attn.fwd + attn.bwd + rec.attention) + a2a_exposed;
  ph[Phase::alltoall] = a2a_exposed;
  ph[Phase::ring_wait] = A * L * (attn.ring_wait_fwd + attn.ring_wait_bwd + (recompute ? attn.ring_wait_fwd : 0));
  ph[Phase::mlp] = A * L * (layer.mlp_fwd + layer.mlp_bwd + rec.mlp);
  ph[Phase::lm_head] = A * head;
  ph[Phase::recompute] = A * L * rec.layer + (recompute ? a2a_exposed * a2a.forward_share : 0);
  ph[Phase::offload_wait] = off.wait;
  ph[Phase::copy_engine_busy] = off.copy_engine_busy;
  ph[Phase::grad_reduce] = st.grad_reduce + st.allreduce;  // the run's timer: ZeRO 0, 1 the all-reduce's wait too (inside comm)
  ph[Phase::param_gather] = st.gather_beside + st.gather_after;
  // tensor parallelism: its calls inside the MLP and head phases too; the gradient sums in comm (ZeRO 0, 1)
  const bool sums_in_comm = c.step.parallel.zero <= 1;
  ph[Phase::tensor_comm] = tp.total;
  ph[Phase::mlp] += tp.mlp;
  ph[Phase::lm_head] += tp.lm_head;
  ph[Phase::comm] = st.comm + (sums_in_comm ? tp.grad_sum : 0);
  ph[Phase::optimizer] = optimizer;
  const double a2a_fwd = a2a_exposed * a2a.forward_share;
  ph[Phase::forward] = A * (layers_fwd + 2 * c.t_op) + a2a_fwd + st.gather_beside / 2 + tp.forward;  // + embedding's few calls
  ph[Phase::backward] = A * (layers_bwd + 2 * c.t_op) + (a2a_exposed - a2a_fwd) + off.wait + st.gather_beside / 2 +
                        (st.grad_reduce - st.last_reduce_scatter) + (tp.total - tp.forward - (sums_in_comm ? tp.grad_sum : 0));
  t.step_s = ph[Phase::forward] + ph[Phase::backward] + ph[Phase::comm] + optimizer;
  ph[Phase::step] = t.step_s;
  return t;
}
}  // namespace

StepTime predict_step_time(const PricedStep& sh, const MachineRates& machine) {
  // a run of fewer ranks than a node holds shares less of it (MachineRates::at_busy_ranks)
  const MachineRates m = machine.at_busy_ranks(std::min(sh.world, machine.ranks_per_node));
  const PriceContext c = price_context(sh, m);
  const LayerPrice layer = price_layer(c);
  const AttentionPrice attn = price_attention(c);
  const AlltoallPrice a2a = price_alltoall(c);
  const double head = price_lm_head(c);
  const RecomputePrice rec = price_recompute(c, layer, attn);
  const OffloadPrice off = price_offload(c, layer.proj_fwd + attn.fwd + layer.mlp_fwd,
                                         layer.proj_bwd + attn.bwd + layer.mlp_bwd + rec.layer);
  const double L = c.L;
  const StatesPrice st = price_states(c, L * (layer.proj_fwd + attn.fwd + layer.mlp_fwd) + head,
                                      L * (layer.proj_bwd + attn.bwd + layer.mlp_bwd) + L * rec.layer);
  const double optimizer = price_optimizer(c);
  StepTime t = add_up(c, layer, attn, a2a, head, rec, off, st, optimizer, price_tensor(c));
  const double data_parallel = double(sh.world) / (sh.parallel.sequence_parallel() * sh.parallel.tensor);
  t.tokens_per_s = double(sh.seq_len) * c.A * data_parallel / t.step_s;
  t.mfu_peak_gflops = m.mfu_peak(sh.precision);
  for (const FlopsConvention f : all_of<FlopsConvention>())
    t.mfu[f] = sh.flops[f] / t.step_s / (double(sh.world) * t.mfu_peak_gflops * kGiga);
  return t;
}

EnumMap<PhaseFamily, double> family_seconds(const PhaseSeconds& ph) {
  EnumMap<PhaseFamily, double> f;
  f[PhaseFamily::attention] = ph[Phase::attention];
  f[PhaseFamily::mlp] = ph[Phase::mlp];
  f[PhaseFamily::lm_head] = ph[Phase::lm_head];
  f[PhaseFamily::optimizer] = ph[Phase::optimizer];
  f[PhaseFamily::other] = ph[Phase::forward] + ph[Phase::backward] - ph[Phase::attention] - ph[Phase::mlp] - ph[Phase::lm_head];
  return f;
}

}  // namespace minilst
