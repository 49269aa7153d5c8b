// The compute families of the time model (time_model.hpp): a layer's projections and MLP
// (decoder_layer.cpp, mlp_block.cpp), the LM head (lm_head.cpp) and AdamW (kernels/adamw.hpp).
#include "predict/time_model.hpp"

#include "core/units.hpp"

namespace minilst {

namespace {
}  // namespace

LayerPrice price_layer(const PriceContext& c) {
  const Precision p = c.p;
  const double R_proj = c.m.gemm(p, GemmClass::projection) * kGiga, R_mlp = c.m.gemm(p, GemmClass::mlp) * kGiga;
  const double k_other = c.m.scale(p, PhaseFamily::other), k_mlp = c.m.scale(p, PhaseFamily::mlp);
  const double S_l = c.S_l, d = c.d, T = c.T, I = c.I;
  LayerPrice x;
  // projections q, k, v, o: forward 2 S_l (d Hh + 2 d Gh + Hh d) FLOPs (project_qkv, y += o Wo);
  // backward twice that (dW and dX of each, DecoderLayer::backward)
  const double proj_flops = 2.0 * S_l * (d * c.Hh + 2.0 * d * c.Gh + c.Hh * d);
  // elementwise outside the blocks: rmsnorm (read x, write an), rope q and k, y = x; the
  // backward re-runs the norm and adds rmsnorm' and rope': about twice the bytes
  // (another framework's figures: its own count per hidden unit and head dim, machine_rates.hpp)
  const auto& fw = c.m.framework;
  const bool own = fw.hidden == 0;
  const double proj_bytes = own ? T * S_l * (4.0 * d + 2.0 * (c.Hh + c.Gh) + 2.0 * d)
                                : S_l * (fw.hidden * d + fw.heads * (c.Hh + c.Gh));
  x.proj_fwd = k_other * (proj_flops / R_proj + proj_bytes / c.B_el + 8 * c.t_op);
  x.proj_bwd = k_other * (2.0 * proj_flops / R_proj + 2.0 * proj_bytes / c.B_el + 14 * c.t_op);
  // MLP, per chunk: gate and up 2 S 2 d I, down 2 S d I forward; the backward's recompute of
  // gate/up (when not saved) and 4 S 3 d I; SwiGLU reads g, u and writes m (3 S I elements), its
  // backward reads 3 and writes 2; rmsnorm and residual 4 S d
  const bool saved = c.store.mlp_saved;
  const double mlp_fwd_flops = 2.0 * S_l * 3.0 * d * I, mlp_recompute_flops = saved ? 0 : 2.0 * S_l * 2.0 * d * I;
  const double mlp_bytes_fwd = own ? T * S_l * (3.0 * I + 4.0 * d) : S_l * fw.intermediate * I;
  const double mlp_bytes_bwd =
      own ? T * S_l * (5.0 * I + (saved ? 0.0 : 3.0 * I) + 6.0 * d) : (saved ? 2.0 : 3.0) * mlp_bytes_fwd;
  x.mlp_fwd = k_mlp * (mlp_fwd_flops / R_mlp + mlp_bytes_fwd / c.B_el + c.mlp_chunks * 5 * c.t_op);
  x.mlp_bwd = k_mlp * ((2.0 * mlp_fwd_flops + mlp_recompute_flops) / R_mlp + mlp_bytes_bwd / c.B_el +
                       c.mlp_chunks * 10 * c.t_op);
  return x;
}

// The final norm, 2 S_l d V forward and 4 S_l d V backward in chunks, the softmax and its
// gradient over [S_l, V] (about 4 passes of T bytes).
double price_lm_head(const PriceContext& c) {
  const double R_head = c.m.gemm(c.p, GemmClass::lm_head) * kGiga;
  const double bytes_per_logit = c.m.framework.lm_head > 0 ? c.m.framework.lm_head : 4.0 * c.T;
  return c.m.scale(c.p, PhaseFamily::lm_head) *
         (6.0 * c.S_l * c.d * c.V / R_head + bytes_per_logit * c.S_l * c.V / c.B_el + c.head_chunks * 8 * c.t_op);
}

// AdamW reads weight, gradient, two moments, writes three (and the bf16 copy under mixed
// precision): 28 bytes an fp32 element, 30 under bf16, 56 in double; with optimizer offload the
// gradient shard goes down the host link and the new weights come up.
double price_optimizer(const PriceContext& c) {
  const PricedStep& sh = c.step;
  const double own_bytes = c.p == Precision::float64 ? 56.0 : c.p == Precision::bf16 ? 30.0 : 28.0;
  const double adam_bytes = c.m.framework.optimizer > 0 ? c.m.framework.optimizer : own_bytes;
  const double B_opt = c.m.optimizer_gbs > 0 ? c.m.optimizer_gbs * kGiga : c.B_el;  // AdamW's own rate where measured
  double optimizer =
      c.m.scale(c.p, PhaseFamily::optimizer) * (double(sh.optimizer_elements) * adam_bytes / B_opt + 4 * c.t_op);
  if (sh.optimizer_on_host && !c.m.host_same_memory && c.m.host_link_gbs > 0)
    optimizer += double(sh.optimizer_elements) * (4.0 + c.T) / (c.m.host_link_gbs * kGiga);
  return optimizer;
}

}  // namespace minilst
