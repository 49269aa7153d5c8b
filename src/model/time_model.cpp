#include "model/time_model.hpp"

#include <algorithm>
#include <stdexcept>

#include "attention/attention_geometry.hpp"
#include "core/range.hpp"
#include "memory/activation_store.hpp"
#include "model/comm_model.hpp"

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
// One collective call of `bytes` (as comm_model counts them) over `link`.
double transfer_s(const LinkRate& link, double bytes, double calls = 1) {
  return calls * link.latency_us * kMicro + bytes / (link.gbs * kGiga);
}

// The busiest rank's causal (query, key) pairs against each ring block, its own included.
// zigzag: every other block's pairs are half visible (its early chunk to this rank's late
// one and ...): n_me n_b / 2; contiguous: earlier blocks wholly, later ones not at all.
// The own block: n (n + 1) / 2.
std::vector<double> pairs_per_block(const AttentionGeometry& g) {
  const int R = g.R(), me = g.me_ring;
  const double n_me = double(g.group_rows());
  std::vector<double> pairs(R, 0.0);
  for (int b = 0; b < R; ++b) {
    const double n_b = double(g.block_rows[b]);
    if (b == me) pairs[b] = n_me * (n_me + 1) / 2;
    else if (g.parallel.layout == RingLayout::zigzag) pairs[b] = n_me * n_b / 2;
    else pairs[b] = b < me ? n_me * n_b : 0.0;
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
  const double q_here = double(g.q_heads_here()) * h;
  const double t_op = m.op_overhead_us * kMicro;
  const double R_proj = m.gemm(p, "projection"), R_mlp = m.gemm(p, "mlp"), R_head = m.gemm(p, "lm_head");
  const double R_fwd = m.attention(p, "forward"), R_bwd = m.attention(p, "backward");
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
  const double proj_fwd = proj_flops / (R_proj * kGiga) + proj_bytes / B_el + 8 * t_op;
  const double proj_bwd = 2.0 * proj_flops / (R_proj * kGiga) + 2.0 * proj_bytes / B_el + 14 * t_op;
  // MLP (mlp_block.cpp), per chunk: gate and up 2 S 2 d I, down 2 S d I forward; the
  // backward's recompute of gate/up (when not saved) and 4 S 3 d I; SwiGLU reads g, u and
  // writes m (3 S I elements), its backward reads 3 and writes 2; rmsnorm and residual 4 S d
  const double mlp_fwd_flops = 2.0 * S_l * 3.0 * d * I, mlp_recompute_flops = plan.mlp_saved ? 0 : 2.0 * S_l * 2.0 * d * I;
  const double mlp_fwd = mlp_fwd_flops / (R_mlp * kGiga) + T * S_l * (3.0 * I + 4.0 * d) / B_el + mlp_chunks * 5 * t_op;
  const double mlp_bwd = (2.0 * mlp_fwd_flops + mlp_recompute_flops) / (R_mlp * kGiga) +
                         T * S_l * (5.0 * I + (plan.mlp_saved ? 0.0 : 3.0 * I) + 6.0 * d) / B_el + mlp_chunks * 10 * t_op;

  // --- attention (local_attention / ulysses_attention / ring_attention) ---
  // FLOPs of the rank's causal pairs, q h per pair: forward 4, backward 10 (flops.hpp)
  const auto pairs = pairs_per_block(g);
  double attn_fwd = 0, attn_bwd = 0, ring_wait_fwd = 0, ring_wait_bwd = 0;
  const int R = g.R();
  // ring hops: the next block's transfer is posted before the current block is computed
  // (ring_pass), so a hop costs max(compute, transfer); ring_wait the excess. Bytes per
  // hop as comm_model counts them (ring_layer_bytes over its R - 1 hops).
  const auto ring = ring_layer_bytes(g, std::uint64_t(T), master_bytes(p));
  const LinkRate p2p = R > 1 ? m.link("p2p", sh.parallel.ulysses * R) : LinkRate{};
  const double hop_fwd = R > 1 ? transfer_s(p2p, double(ring.forward) / (R - 1)) : 0;
  const double hop_bwd = R > 1 ? transfer_s(p2p, double(ring.backward) / (R - 1)) : 0;
  for (int i = 0; i < R; ++i) {
    const int b = (g.me_ring - i + R) % R;  // hop i computes the block that arrived i hops ago
    const double f = 4.0 * pairs[b] * q_here / (R_fwd * kGiga) + 2 * t_op;
    const double bw = 10.0 * pairs[b] * q_here / (R_bwd * kGiga) + 2 * t_op;
    const bool transfer = i + 1 < R;  // the last block computed has nothing in flight behind it
    const double wf = transfer ? (sh.parallel.overlap ? std::max(0.0, hop_fwd - f) : hop_fwd) : 0;
    const double wb = transfer ? (sh.parallel.overlap ? std::max(0.0, hop_bwd - bw) : hop_bwd) : 0;
    attn_fwd += f, attn_bwd += bw, ring_wait_fwd += wf, ring_wait_bwd += wb;
  }
  // RSA's seed backward: its two ring all-reduces of dK, dV, exposed
  if (R > 1 && ring.allreduce > 0) ring_wait_bwd += transfer_s(m.link("allreduce", R), double(ring.allreduce), 2);
  // Ulysses: four all-to-alls forward (q, k, v scatter, o gather), four backward, each
  // exposed: t0 + bytes / B_alltoall (bytes: comm_model's alltoall per step)
  double a2a_step = 0;
  if (g.U() > 1) {
    const double calls = A * L * (4.0 * (plan.recompute_attention() ? 2 : 1) + 4.0 + (plan.rederive_kept() ? 4.0 : 0));
    const auto it = sh.comm.find("alltoall");
    a2a_step = transfer_s(m.link("alltoall", g.U()), it == sh.comm.end() ? 0.0 : double(it->second), calls);
  }
  const double a2a_fwd_share = g.U() > 1 ? 4.0 / (8.0 + (plan.recompute_attention() ? 4 : 0) + (plan.rederive_kept() ? 4 : 0)) : 0;
  const double attention_fwd_layer = attn_fwd + ring_wait_fwd;   // per layer, a2a added per step below
  const double attention_bwd_layer = attn_bwd + ring_wait_bwd;

  // --- LM head (lm_head.cpp): final norm, 2 S_l d V forward and 4 S_l d V backward in chunks,
  // the softmax and its gradient over [S_l, V] (about 4 passes of T bytes) ---
  const double head = 6.0 * S_l * d * V / (R_head * kGiga) + 4.0 * T * S_l * V / B_el + head_chunks * 8 * t_op;

  // --- recompute (activation_store.cpp): checkpointing redoes each layer's forward; offload
  // recomputes the token rows it did not move (projections and o, the MLP when saved) ---
  double recompute_layer = 0, recompute_attention = 0, recompute_mlp = 0;
  if (plan.recompute_attention()) {
    recompute_attention = attention_fwd_layer;
    recompute_mlp = mlp_fwd;
    recompute_layer = proj_fwd + attention_fwd_layer + mlp_fwd;
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
  double comm = 0, grad_reduce = 0, rs_last = 0, param_gather_fb = 0, param_gather_after = 0;
  const double units = L + 2;  // the embedding, the layers, the head (unit_gather_order)
  const double layers_fwd = L * (proj_fwd + attention_fwd_layer + mlp_fwd) + head;
  const double layers_bwd = L * (proj_bwd + attention_bwd_layer + mlp_bwd) + L * recompute_layer;
  if (P > 1) {
    if (zero <= 1) comm += transfer_s(m.link("allreduce", P), bytes_of("allreduce"));  // after the micro-steps
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
  double optimizer = double(sh.optimizer_elements) * adam_bytes / B_opt + 4 * t_op;
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
  ph["grad_reduce"] = grad_reduce;
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
