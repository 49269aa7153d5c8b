#include "model/time_model.hpp"

#include <algorithm>
#include <stdexcept>

#include "attention/attention_geometry.hpp"
#include "core/range.hpp"
#include "kernels/attention_tiles.hpp"
#include "memory/activation_store.hpp"
#include "model/comm_model.hpp"
#include "parallel/mask_pairs.hpp"
#include "parallel/ring_reach.hpp"

namespace minilst {

namespace {
constexpr double kGiga = 1e9;
constexpr double kMicro = 1e-6;

double positive(double v, const std::string& key) {
  if (!(v > 0)) throw std::runtime_error("machine file: " + key + " is missing or not positive");
  return v;
}
}  // namespace

double MachineRates::gemm(Precision p, const std::string& shape_class) const {
  const std::string key = "gemm_gflops." + name_of(p) + "." + shape_class;
  const auto it = gemm_gflops.find(name_of(p));
  if (it == gemm_gflops.end() || !it->second.count(shape_class)) throw std::runtime_error("machine file: " + key + " is missing");
  return positive(it->second.at(shape_class), key);
}

double MachineRates::attention(Precision p, const std::string& direction) const {
  const std::string key = "attention_gflops." + name_of(p) + "." + direction;
  const auto it = attention_gflops.find(name_of(p));
  if (it == attention_gflops.end() || !it->second.count(direction)) throw std::runtime_error("machine file: " + key + " is missing");
  return positive(it->second.at(direction), key);
}

double MachineRates::mfu_peak(Precision p) const {
  const auto it = mfu_peak_gflops.find(name_of(p));
  return it != mfu_peak_gflops.end() && it->second > 0 ? it->second : gemm(p, "square");
}

double MachineRates::scale(Precision p, const std::string& family) const {
  const auto it = step_scale.find(name_of(p));
  if (it == step_scale.end()) return 1.0;
  const auto f = it->second.find(family);
  return f == it->second.end() ? 1.0 : f->second;
}

double MachineRates::attention_padding(Precision p, int heads_per_kv, int head_dim) const {
  const auto k = attention_kernel.find(name_of(p));
  if (attention_heads_per_kv < 1 || attention_head_dim < 1 || k == attention_kernel.end() || k->second != "portable")
    return 1.0;
  return kernels::AttnTiles(head_dim, heads_per_kv).padding() /
         kernels::AttnTiles(attention_head_dim, attention_heads_per_kv).padding();
}

LinkRate MachineRates::link(const std::string& op, int ranks) const {
  const std::string scope = ranks <= ranks_per_node ? "intra_node" : "inter_node";
  const std::string key = "links." + scope + "." + op;
  const auto s = links.find(scope);
  if (s == links.end() || !s->second.count(op))
    throw std::runtime_error("machine file: " + key + " is missing (needed for a collective of " + std::to_string(ranks) +
                             " ranks; probe with that many ranks or write it by hand)");
  LinkRate r = s->second.at(op);
  positive(r.gbs, key + ".gbs");
  return r;
}

namespace {
// One collective call of `bytes` (as comm_model counts them) over `link`, after compute.
double transfer_s(const LinkRate& link, double bytes, double calls = 1) {
  return calls * (link.latency_us + link.sync_us) * kMicro + bytes / (link.gbs * kGiga);
}

// A rank's useful (query, key) pairs against each ring block, its own included, under the
// deck's mask (parallel/mask_pairs.hpp: causal, packed documents, a window; any layout), the
// mean over the layers (a window in some of them only). Causal zigzag: n_me n_b / 2 for every
// other block; contiguous: earlier blocks wholly, later ones not at all; the own block n (n + 1) / 2.
std::vector<double> pairs_per_block(const AttentionGeometry& g, const SequenceLayout& layout, const SequenceMask& mask,
                                    int layers) {
  int windowed = 0;
  for (int l = 0; l < layers; ++l) windowed += mask.windowed(l) ? 1 : 0;
  std::vector<double> pairs(g.R(), 0.0);
  for (int b = 0; b < g.R(); ++b)
    for (const bool w : {false, true}) {
      const int n = w ? windowed : layers - windowed;
      if (n > 0)
        pairs[b] += double(n) / layers *
                    visible_pairs(layout.group_ranges(g.me_ring), layout.group_ranges(b), mask.of_layers(w));
    }
  return pairs;
}
}  // namespace

StepTime predict_step_time(const StepShape& sh, const MachineRates& m) {
  const ModelConfig& c = sh.model;
  const Precision p = sh.precision;
  const double T = double(scalar_bytes(p)), A = sh.grad_accum, L = c.layers;
  const double d = c.hidden, h = c.head_dim(), Hh = double(c.heads) * h, Gh = double(c.kv_heads) * h;
  const double I = c.intermediate, V = c.vocab;
  const auto g = attention_geometry(c, sh.parallel, sh.layout, sh.sp_rank);
  const double S_l = double(g.local_rows);
  const double t_op = m.op_overhead_us * kMicro;
  const double R_proj = m.gemm(p, "projection"), R_mlp = m.gemm(p, "mlp"), R_head = m.gemm(p, "lm_head");
  // attention's rates per useful FLOP, for this problem's tiles (attention_padding) and as a step sustains them
  const double attn_k = m.scale(p, "attention") * m.attention_padding(p, g.q_heads_here() / std::max(1, g.kv_heads_here()), int(h));
  const double R_fwd = m.attention(p, "forward") / attn_k, R_bwd = m.attention(p, "backward") / attn_k;
  // the step_scale of the other phase families (1 without a calibration step)
  const double k_other = m.scale(p, "other"), k_mlp = m.scale(p, "mlp"), k_head = m.scale(p, "lm_head");
  const double B_el = positive(m.elementwise_gbs, "elementwise_gbs") * kGiga;
  const int mlp_chunks = std::max(1, effective_chunks(g.local_rows, sh.options.mlp_chunks));
  const StorePlan plan = store_plan(sh.options.policy, c.layers, sh.options.offload.alpha, g.local_rows, mlp_chunks);
  const int head_chunks = std::max(1, effective_chunks(g.local_rows, sh.options.lm_head_chunks));

  // --- per layer, per micro-step: compute (decoder_layer.cpp, mlp_block.cpp) ---
  // projections q, k, v, o: forward 2 S_l (d Hh + 2 d Gh + Hh d) FLOPs (project_qkv, y += o Wo);
  // backward twice that (dW and dX of each, DecoderLayer::backward)
  const double proj_flops = 2.0 * S_l * (d * Hh + 2.0 * d * Gh + Hh * d);
  // elementwise outside the blocks: rmsnorm (read x, write an), rope q and k, y = x; the
  // backward re-runs the norm and adds rmsnorm' and rope': about twice the bytes
  const double proj_bytes = T * S_l * (4.0 * d + 2.0 * (Hh + Gh) + 2.0 * d);
  const double proj_fwd = k_other * (proj_flops / (R_proj * kGiga) + proj_bytes / B_el + 8 * t_op);
  const double proj_bwd = k_other * (2.0 * proj_flops / (R_proj * kGiga) + 2.0 * proj_bytes / B_el + 14 * t_op);
  // MLP (mlp_block.cpp), per chunk: gate and up 2 S 2 d I, down 2 S d I forward; the
  // backward's recompute of gate/up (when not saved) and 4 S 3 d I; SwiGLU reads g, u and
  // writes m (3 S I elements), its backward reads 3 and writes 2; rmsnorm and residual 4 S d
  const double mlp_fwd_flops = 2.0 * S_l * 3.0 * d * I, mlp_recompute_flops = plan.mlp_saved ? 0 : 2.0 * S_l * 2.0 * d * I;
  const double mlp_fwd = k_mlp * (mlp_fwd_flops / (R_mlp * kGiga) + T * S_l * (3.0 * I + 4.0 * d) / B_el + mlp_chunks * 5 * t_op);
  const double mlp_bwd = k_mlp * ((2.0 * mlp_fwd_flops + mlp_recompute_flops) / (R_mlp * kGiga) +
                                  T * S_l * (5.0 * I + (plan.mlp_saved ? 0.0 : 3.0 * I) + 6.0 * d) / B_el + mlp_chunks * 10 * t_op);

  // --- attention (local_attention / ulysses_attention / ring_attention) ---
  // FLOPs of a rank's visible pairs (pairs_per_block), q h per pair: forward 4, backward 10 (flops.hpp).
  // The ring's members run in lockstep: hop t's send/receive pairs each member with its
  // neighbours (ring_pass: hop.finish waits for both), so a member cannot start hop t + 1
  // before its neighbours have posted hop t, and a member ahead of the others waits in
  // the ring (its ring_wait). A hop therefore lasts as long as its slowest member's block
  // (contiguous: the last member sees every earlier block while the first sees only its own),
  // or its transfer where that is longer (the next block is posted before the current one
  // is computed). Every sequence-parallel rank's geometry is priced; the step's attention
  // is the busiest member's (the sum of the hops), ring_wait the idlest member's excess.
  const int R = g.R(), SP = sh.parallel.sequence_parallel();
  // the whole layers' mask: blocks travel as far as they are seen (ring_reach)
  const std::vector<int> reach = R > 1 ? ring_reach(sh.layout, sh.options.mask.of_layers(false)) : std::vector<int>{};
  const LinkRate p2p = R > 1 ? m.link("p2p", sh.parallel.ulysses * R) : LinkRate{};
  const double Gh_here = double(g.kv_heads_here()) * h;
  const bool rsa = sh.parallel.variant == RingVariant::rsa;
  std::vector<double> hop_f(R, 0.0), hop_b(R, 0.0), xfer_f(R, 0.0), xfer_b(R, 0.0);  // per hop, max over ranks
  // a hop that exchanges anything also waits for the neighbours' arrival (p2p.sync_us), overlap or not
  LinkRate p2p_link = p2p;
  p2p_link.sync_us = 0;
  const double hop_sync = p2p.sync_us * kMicro;
  std::vector<double> busy_f(SP, 0.0), busy_b(SP, 0.0);                              // per rank, summed over hops
  for (int s = 0; s < SP; ++s) {
    const auto gs = attention_geometry(c, sh.parallel, sh.layout, s);
    const auto pairs = pairs_per_block(gs, sh.layout, sh.options.mask, c.layers);
    const double q_s = double(gs.q_heads_here()) * h;
    for (int t = 0; t < R; ++t) {
      const int b = (gs.me_ring - t + R) % R;  // hop t computes the block that arrived t hops ago
      const double f = 4.0 * pairs[b] * q_s / (R_fwd * kGiga) + 2 * t_op;
      const double bw = 10.0 * pairs[b] * q_s / (R_bwd * kGiga) + 2 * t_op;
      hop_f[t] = std::max(hop_f[t], f), hop_b[t] = std::max(hop_b[t], bw);
      busy_f[s] += f, busy_b[s] += bw;
      if (t + 1 >= R) continue;  // the last block computed has nothing in flight behind it
      // hop t's messages, block b's K and V each (hop_sends: as comm_model counts them)
      const HopSends sends = hop_sends(t, reach.empty() ? R - 1 : reach[b], R, rsa, sh.parallel.rsa_seed_backward());
      const double kv = 2.0 * double(gs.block_rows[b]) * Gh_here * T;
      const double fwd_bytes = sends.forward * kv, bwd_bytes = sends.backward * kv;
      if (fwd_bytes > 0) xfer_f[t] = std::max(xfer_f[t], transfer_s(p2p_link, fwd_bytes));
      if (bwd_bytes > 0) xfer_b[t] = std::max(xfer_b[t], transfer_s(p2p_link, bwd_bytes));
    }
  }
  double attn_fwd = 0, attn_bwd = 0;  // the busiest member's compute
  for (int s = 0; s < SP; ++s) attn_fwd = std::max(attn_fwd, busy_f[s]), attn_bwd = std::max(attn_bwd, busy_b[s]);
  double pass_fwd = 0, pass_bwd = 0;  // the lockstep passes: per hop the slowest member, or its transfer
  for (int t = 0; t < R; ++t) {
    pass_fwd += (sh.parallel.overlap ? std::max(hop_f[t], xfer_f[t]) : hop_f[t] + xfer_f[t]) + (xfer_f[t] > 0 ? hop_sync : 0);
    pass_bwd += (sh.parallel.overlap ? std::max(hop_b[t], xfer_b[t]) : hop_b[t] + xfer_b[t]) + (xfer_b[t] > 0 ? hop_sync : 0);
  }
  // ring_wait as the run's busiest-rank maximum reports it: the idlest member's wait
  double ring_wait_fwd = 0, ring_wait_bwd = 0;
  for (int s = 0; s < SP && R > 1; ++s)
    ring_wait_fwd = std::max(ring_wait_fwd, pass_fwd - busy_f[s]), ring_wait_bwd = std::max(ring_wait_bwd, pass_bwd - busy_b[s]);
  const auto ring = ring_layer_bytes(g, reach, std::uint64_t(T), master_bytes(p));
  // RSA's seed backward: its two ring all-reduces of dK, dV, exposed
  const double rsa_allreduce = R > 1 && ring.allreduce > 0 ? transfer_s(m.link("allreduce", R), double(ring.allreduce), 2) : 0.0;
  ring_wait_bwd += rsa_allreduce;
  // Ulysses: four all-to-alls forward (q, k, v scatter, o gather), four backward, each
  // exposed: t0 + bytes / B_alltoall (bytes: comm_model's alltoall per step)
  double a2a_step = 0;
  if (g.U() > 1) {
    const double calls = A * L * (4.0 * (plan.recompute_attention() ? 2 : 1) + 4.0 + (plan.rederive_kept() ? 4.0 : 0));
    const auto it = sh.comm.find("alltoall");
    a2a_step = transfer_s(m.link("alltoall", g.U()), it == sh.comm.end() ? 0.0 : double(it->second), calls);
  }
  const double a2a_fwd_share = g.U() > 1 ? 4.0 / (8.0 + (plan.recompute_attention() ? 4 : 0) + (plan.rederive_kept() ? 4 : 0)) : 0;
  // per layer (a2a added per step below): every member's pass lasts the lockstep's
  const double attention_fwd_layer = std::max(attn_fwd, pass_fwd);
  const double attention_bwd_layer = std::max(attn_bwd, pass_bwd) + rsa_allreduce;

  // --- LM head (lm_head.cpp): final norm, 2 S_l d V forward and 4 S_l d V backward in chunks,
  // the softmax and its gradient over [S_l, V] (about 4 passes of T bytes) ---
  const double head = k_head * (6.0 * S_l * d * V / (R_head * kGiga) + 4.0 * T * S_l * V / B_el + head_chunks * 8 * t_op);

  // --- recompute (activation_store.cpp): checkpointing redoes each layer's attention block (the
  // MLP's input; the MLP backward recomputes its own gate/up); offload
  // recomputes the token rows it did not move (projections and o, the MLP when saved) ---
  double recompute_layer = 0, recompute_attention = 0, recompute_mlp = 0;
  if (plan.recompute_attention()) {  // the attention block alone (forward_attention: norm, q/k/v, attention, o)
    recompute_attention = attention_fwd_layer;
    recompute_layer = proj_fwd + attention_fwd_layer;
  } else if (sh.options.policy == MemoryPolicy::offload) {
    // the layers whose row set lost its buffer to a later layer recompute the rows not in host
    // memory, 1 - alpha of them (all of them where no row set is kept) (ActivationStore::backward_begin);
    // averaged per layer
    int redone = 0;
    for (int l = 0; l < c.layers; ++l) redone += plan.row_buffers == 0 || plan.reused(Family::rows, l, c.layers);
    const double rows = (plan.row_buffers == 0 ? 1.0 : 1.0 - sh.options.offload.alpha) * redone / L;
    recompute_mlp = plan.mlp_saved ? rows * mlp_fwd : 0;
    recompute_layer = rows * proj_fwd + recompute_mlp;
  }

  // --- offload (the copy engine, a thread or a CUDA stream beside the compute): layer l's
  // copy runs while layer l+1 computes: per layer max(0, copy - compute), each way ---
  double offload_wait = 0, copy_busy = 0;
  if (uses_host_memory(sh.options.policy) && sh.offload_bytes > 0) {
    const double B_copy = positive(m.host_link_gbs, "host_link.gbs") * kGiga;
    const double per_layer = double(sh.offload_bytes) / L / B_copy;
    const double fwd_compute = proj_fwd + attention_fwd_layer + mlp_fwd;
    const double bwd_compute = proj_bwd + attention_bwd_layer + mlp_bwd + recompute_layer;
    offload_wait = A * (L * std::max(0.0, per_layer - fwd_compute) + L * std::max(0.0, per_layer - bwd_compute) +
                        per_layer);  // the last layer's copy has no compute behind it
    copy_busy = A * 2.0 * double(sh.offload_bytes) / B_copy;
  }

  // --- the model states' collectives (model_states.cpp) over every rank ---
  const auto bytes_of = [&](const char* op) {
    const auto it = sh.comm.find(op);
    return it == sh.comm.end() ? 0.0 : double(it->second);
  };
  const int P = sh.world;
  const int zero = sh.parallel.zero;
  double comm = 0, allreduce = 0, grad_reduce = 0, rs_last = 0, param_gather_fb = 0, param_gather_after = 0;
  const double units = L + 2;  // the embedding, the layers, the head (unit_gather_order)
  const double layers_fwd = L * (proj_fwd + attention_fwd_layer + mlp_fwd) + head;
  const double layers_bwd = L * (proj_bwd + attention_bwd_layer + mlp_bwd) + L * recompute_layer;
  if (P > 1) {
    if (zero <= 1) allreduce = transfer_s(m.link("allreduce", P), bytes_of("allreduce"));  // after the micro-steps
    comm += allreduce;
    if (zero >= 2) {  // reduce-scatters posted per unit in the backward; the last one's wait in comm
      const double rs = transfer_s(m.link("reduce_scatter", P), bytes_of("reduce_scatter"), A * units);
      rs_last = rs / (A * units);
      grad_reduce = std::max(0.0, rs - A * layers_bwd) + rs_last;
      comm += rs_last;
    }
    if (zero == 1 || zero == 2) {  // all-gathers of the new weights after AdamW (inside comm)
      param_gather_after = transfer_s(m.link("allgather", P), bytes_of("allgather"), units);
      comm += param_gather_after;
    }
    if (zero == 3) {  // each unit's gather beside the previous unit's compute; the first exposed
      const double ag = transfer_s(m.link("allgather", P), bytes_of("allgather"), A * 2 * units);
      param_gather_fb = std::max(0.0, ag - A * (layers_fwd + layers_bwd)) + ag / (A * 2 * units);
    }
  }

  // --- AdamW (kernels/adamw.hpp): reads weight, gradient, two moments, writes three (and the
  // bf16 copy under mixed precision): 28 bytes an fp32 element, 30 under bf16, 56 in double ---
  const double adam_bytes = p == Precision::float64 ? 56.0 : p == Precision::bf16 ? 30.0 : 28.0;
  const double B_opt = m.optimizer_gbs > 0 ? m.optimizer_gbs * kGiga : B_el;  // AdamW's own rate where measured
  double optimizer = m.scale(p, "optimizer") * (double(sh.optimizer_elements) * adam_bytes / B_opt + 4 * t_op);
  if (sh.optimizer_on_host && !m.host_same_memory && m.host_link_gbs > 0)  // the gradient shard down, weights up
    optimizer += double(sh.optimizer_elements) * (4.0 + T) / (m.host_link_gbs * kGiga);

  StepTime t;
  auto& ph = t.phases;
  ph["attention"] = A * L * (attention_fwd_layer + attention_bwd_layer + recompute_attention) + a2a_step;
  ph["alltoall"] = a2a_step;
  ph["ring_wait"] = A * L * (ring_wait_fwd + ring_wait_bwd + (plan.recompute_attention() ? ring_wait_fwd : 0));
  ph["mlp"] = A * L * (mlp_fwd + mlp_bwd + recompute_mlp);
  ph["lm_head"] = A * head;
  ph["recompute"] = A * L * recompute_layer + (plan.recompute_attention() ? a2a_step * a2a_fwd_share : 0);
  ph["offload_wait"] = offload_wait;
  ph["copy_engine_busy"] = copy_busy;
  ph["grad_reduce"] = grad_reduce + allreduce;  // the run's timer: ZeRO 0, 1 the all-reduce's wait too (inside comm)
  ph["param_gather"] = param_gather_fb + param_gather_after;
  ph["comm"] = comm;
  ph["optimizer"] = optimizer;
  const double a2a_fwd = a2a_step * a2a_fwd_share;
  ph["forward"] = A * (layers_fwd + 2 * t_op) + a2a_fwd + param_gather_fb / 2;  // + embedding's few calls
  ph["backward"] = A * (layers_bwd + 2 * t_op) + (a2a_step - a2a_fwd) + offload_wait + param_gather_fb / 2 +
                   (grad_reduce - rs_last);
  t.step_s = ph["forward"] + ph["backward"] + comm + optimizer;
  ph["step"] = t.step_s;
  const double data_parallel = double(P) / sh.parallel.sequence_parallel();
  t.tokens_per_s = double(sh.seq_len) * A * data_parallel / t.step_s;
  t.mfu = sh.model_flops / t.step_s / (double(P) * m.mfu_peak(p) * kGiga);
  return t;
}

}  // namespace minilst
