#include "attention/attention_geometry.hpp"

namespace minilst {

std::string AttentionGeometry::name() const {
  const std::string ring = R() > 1 ? std::string(parallel.variant == RingVariant::flash ? "ring" : "ring-rsa") + "(" +
                                         name_of(parallel.layout) + ")"
                                   : "";
  if (U() > 1 && R() > 1) return "hybrid ulysses x " + ring;
  if (U() > 1) return "ulysses";
  if (R() > 1) return ring;
  return "local";
}

AttentionGeometry attention_geometry(const ModelConfig& cfg, const ParallelConfig& par, const SequenceLayout& layout,
                                     int sp) {
  AttentionGeometry g;
  g.parallel = par;
  g.heads = cfg.heads;
  g.kv_heads = cfg.kv_heads;
  g.head_dim = cfg.head_dim();
  g.me_ulysses = sp % par.ulysses;
  g.me_ring = sp / par.ulysses;
  g.local_rows = layout.tokens(sp);
  for (int r = 0; r < par.ring; ++r) g.block_rows.push_back(layout.group_tokens(r));
  if (par.ulysses > 1)
    for (int u = 0; u < par.ulysses; ++u) g.member_rows.push_back(layout.tokens(g.me_ring * par.ulysses + u));
  return g;
}

}  // namespace minilst
